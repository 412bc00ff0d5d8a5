"""Reports for people outside the platform team: cost (finance) and compliance, as
HTML or PDF (docs/REPORTS.md)."""

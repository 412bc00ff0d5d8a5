"""The SLO shell: the gateway's ledger-fed evaluation service and its exporters."""

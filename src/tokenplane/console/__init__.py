"""The web console at ``/console`` (docs/CONSOLE.md): server-rendered pages over the
ledger's rollups and the admin API, signed in with an API key."""

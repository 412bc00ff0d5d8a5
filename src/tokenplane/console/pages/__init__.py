"""One module per console page: each builds the data its template shows."""

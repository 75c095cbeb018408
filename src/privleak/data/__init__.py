"""Records with PII spans, the synthetic clinical corpus, user-corpus loaders."""

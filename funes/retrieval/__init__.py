"""Layer: recall (hybrid search, fusion, rerank, recency) and `get` over a repository."""

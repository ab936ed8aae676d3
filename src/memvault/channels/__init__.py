"""Channels: the owner reaches the agent on the messaging apps they already use.

:mod:`~memvault.channels.base` is the adapter protocol and what every adapter shares
(its error mapping among it), one module per platform holds only that platform's part
(:mod:`~memvault.channels.telegram`, ``slack``, ``discord``, ``signal``, ``line``,
``whatsapp``, ``email``, ``openclaw_bridge``), :mod:`~memvault.channels.webhook` hands
what a platform's webhook brought to the hub (LINE, WhatsApp),
:mod:`~memvault.channels.hub` runs adapters, router and outbox (starting, restarting
with backoff; the outbox and sending in :mod:`~memvault.channels.outbox`, the
conversations and status for doctor in :mod:`~memvault.channels.hub_view`),
:mod:`~memvault.channels.router` routes every message (the owner's commands
without a model in :mod:`~memvault.channels.owner_commands`, what the daemon wires in
and the turn its agent answers in :mod:`~memvault.channels.hooks`),
:mod:`~memvault.channels.access` decides who may talk, and
:mod:`~memvault.channels.approvals` brings tool approvals to the owner's phone.
"""

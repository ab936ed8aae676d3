"""Channels: the owner reaches the agent on the messaging apps they already use.

:mod:`~memvault.channels.base` is the adapter protocol, :mod:`~memvault.channels.hub`
runs adapters, router and outbox, :mod:`~memvault.channels.router` routes every
message, :mod:`~memvault.channels.access` decides who may talk, and
:mod:`~memvault.channels.approvals` brings tool approvals to the owner's phone.
"""

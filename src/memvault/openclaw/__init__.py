"""OpenClaw: memvault as OpenClaw's memory, and OpenClaw's memory brought into the vault.

- Importing a workspace: ``importers`` (each kind of file to memories, tasks, the
  journal and sessions) on ``entries`` (hand-written Markdown read leniently),
  ``ledger`` (what was imported before), ``report`` (what an import did) and
  ``transcripts`` (OpenClaw's past conversations).
- Installing: ``install`` (the steps and ``status``) on ``install_state`` (the steps,
  the record in install.json, the target, the settings patched in) and ``uninstall``;
  ``plugin/`` (the OpenClaw plugin, JavaScript) and ``templates/`` (the workspace
  files the install writes).
"""

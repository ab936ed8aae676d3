"""Who may know what: audiences, secrets, the trust of text, forgetting, reads.

- :mod:`~memvault.privacy.audiences`: every conversation has an audience (the
  owner, one contact, a group); anyone but the owner gets a narrowed view of
  the memory and no tool beyond it, decided here, never by the model.
- :mod:`~memvault.privacy.secrets`: keys, tokens and card numbers are kept out
  of what is stored (``[privacy] secrets``).
- :mod:`~memvault.privacy.trust`: text from anyone but the owner that reads as
  an instruction to the agent is stored with ``[trust:: low]`` and a reason;
  :mod:`~memvault.privacy.disguise` undoes what hides text (hidden Unicode,
  look-alike letters, encodings) and :mod:`~memvault.privacy.injection_patterns`
  holds the patterns of an instruction, by kind and language.
- :mod:`~memvault.privacy.forgetting`: ``forget`` reaches every copy and says
  where it looked; :mod:`~memvault.privacy.scrub` is its part in the state database
  (chat messages, the channels' inbox and outbox, logs and runs' records),
  :mod:`~memvault.privacy.forget_index` its check that the index followed, and
  :mod:`~memvault.privacy.receipts` the receipt and the plan it gives back.
- :mod:`~memvault.privacy.reads`: who read each memory, when, and how.

The layer sits above ``memory`` and below ``tools``, ``agent`` and
``channels``: inner layers learn of it only through hooks the runtime wires.
"""

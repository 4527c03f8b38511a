"""Dynamic membership of the metadata quorum (KIP-853): the control records that carry the voter
set (`records`), the voter set in force at each log offset (`log_voters`), and the bootstrap
checkpoint that `kraft-node format` writes (`bootstrap`)."""

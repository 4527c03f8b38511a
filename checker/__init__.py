"""Pure checkers: a history and node journals in, a three-valued verdict with explanations out."""

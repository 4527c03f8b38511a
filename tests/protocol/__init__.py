"""Tests of node.protocol; helper modules (entities, handlers, fuzzing) are importable as protocol.*."""

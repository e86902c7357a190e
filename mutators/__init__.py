"""The mutation engine, its mutators (each a class, registered by name) and the seed pool."""
from mutators import classic, control, inplace, insert_op, rnn  # noqa: F401  (register the mutators)
from mutators.base import MUTATORS, Mutant, Mutator
from mutators.engine import MutationConfig, MutationEngine, MutationOutcome

__all__ = ["MUTATORS", "Mutant", "Mutator", "MutationConfig", "MutationEngine", "MutationOutcome"]

"""The mutation engine and its mutators (each a class, registered by name)."""
from mutators.base import MUTATORS, Mutant, Mutator
from mutators.engine import MutationConfig, MutationEngine, MutationOutcome
from mutators import insert_op  # noqa: F401  (registers insert_op)

__all__ = ["MUTATORS", "Mutant", "Mutator", "MutationConfig", "MutationEngine", "MutationOutcome"]

"""The mutation engine, its mutators (each a class, registered by name) and the seed pool."""
# registration order is the order the engine offers mutators in: keep it
from mutators import replace_op, mutate_attrs, mutate_shape, duplicate_region, splice  # noqa: F401, I001
from mutators import control, inplace, insert_op, rnn  # noqa: F401  (register the mutators)
from mutators import custom, region  # noqa: F401  (off unless weighed: mutation.weights)
from mutators.base import MUTATORS, Mutant, Mutator
from mutators.engine import MutationConfig, MutationEngine, MutationOutcome

__all__ = ["MUTATORS", "Mutant", "Mutator", "MutationConfig", "MutationEngine", "MutationOutcome"]

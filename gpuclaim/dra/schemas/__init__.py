"""Driver attribute schemas: what each DRA driver publishes, per release (docs/driver-schemas.md).

:mod:`.model` holds the data model (also the shape of the config file's ``schemas:`` key); :mod:`.registry`
loads the shipped data files of this package once and merges the admin's additions, and describes what an
inventory's devices publish.
"""

from gpuclaim.dra.schemas.model import (
    STANDARD_DOMAIN,
    AttributeSchema,
    AttributeType,
    CapacitySchema,
    DriverSchema,
    Entry,
    MigProfileSet,
    Schema,
    closest,
    qualify,
)

__all__ = [
    "STANDARD_DOMAIN", "AttributeSchema", "AttributeType", "CapacitySchema", "DriverSchema", "Entry",
    "MigProfileSet", "Schema", "closest", "qualify",
]

"""The output guard: verbatim blocker, canary tripwire and PII scanner in front of a model.

See :mod:`privleak.guard.guard` for what it guarantees and what it does not.
"""

from .guard import Guard, ScanSettings, inventory_from_records
from .verdict import Finding, GuardPolicy, Verdict

__all__ = ["Finding", "Guard", "GuardPolicy", "ScanSettings", "Verdict", "inventory_from_records"]

"""The mutating webhook's core: legacy GPU limits → a ResourceClaimTemplate (or a shared claim) + JSONPatch.

Public API: :func:`convert_pod`, :class:`Conversion`, :func:`convert_object` (workloads' pod templates),
:data:`WORKLOAD_TEMPLATE_PATHS`, :class:`ConversionCache` (the webhook's memo of `convert_pod` results).
Pure: no I/O (admission-time creation is ``webhook.templates``).
"""

from gpuclaim.webhook.convert.cache import ConversionCache, conversion_key
from gpuclaim.webhook.convert.pod import MAX_DEVICES, Conversion, convert_pod
from gpuclaim.webhook.convert.workloads import WORKLOAD_TEMPLATE_PATHS, ObjectConversion, convert_object

__all__ = ["MAX_DEVICES", "WORKLOAD_TEMPLATE_PATHS", "Conversion", "ConversionCache", "ObjectConversion",
           "conversion_key", "convert_object", "convert_pod"]

"""Python builders of the `mega` dialect (generated from ODS)."""

from ._mega_ops_gen import *  # noqa: F401,F403
from ._mega_ops_gen import _Dialect  # noqa: F401
from ._mega_enum_gen import *  # noqa: F401,F403

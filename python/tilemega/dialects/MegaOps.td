#ifndef TILEMEGA_PYTHON_MEGAOPS_TD
#define TILEMEGA_PYTHON_MEGAOPS_TD
include "tilemega/Dialect/Mega/IR/MegaOps.td"
#endif

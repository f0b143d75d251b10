#ifndef TILEMEGA_PYTHON_TILEOPS_TD
#define TILEMEGA_PYTHON_TILEOPS_TD
include "tilemega/Dialect/Tile/IR/TileOps.td"
#endif

// The Target interface's out-of-line anchor.
#include "codegen/Target.h"

namespace smelt::codegen {

Target::~Target() = default;

} // namespace smelt::codegen

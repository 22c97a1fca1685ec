// placeholder
#include "bindings.h"
namespace fak::python {
void BindPlanner(nb::module_& m) {}
}  // namespace fak::python

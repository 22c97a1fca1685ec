// placeholder
#include "bindings.h"
namespace fak::python {
void BindStore(nb::module_& m) {}
}  // namespace fak::python

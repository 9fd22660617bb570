// The extension module torch_collectives._C: the backend class, its options, and what
// the package's creator function (see __init__.py) calls.
#include <cmath>

#include <pybind11/chrono.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "process_group.h"

namespace py = pybind11;
using torch_collectives::CollOptions;
using torch_collectives::ProcessGroupCollectives;

namespace {

template <typename Class>
void bindOptions(Class&& c) {
  c.def(py::init([] { return c10::make_intrusive<CollOptions>(); }))
      .def_readwrite("compress", &CollOptions::compress)
      .def_readwrite("deterministic", &CollOptions::deterministic)
      .def_readwrite("net_name", &CollOptions::netName)
      .def_readwrite("min_channels", &CollOptions::minChannels)
      .def_readwrite("max_channels", &CollOptions::maxChannels)
      .def_readwrite("any_source", &CollOptions::anySource)
      .def_readwrite("handoff_us", &CollOptions::handoffUs)
      .def_readwrite("group_name_", &CollOptions::groupName)
      .def_readwrite("global_ranks_in_group_", &CollOptions::globalRanks)
      .def_readwrite("timeout_", &CollOptions::timeout);
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "Collectives' c10d backend (backend name \"collectives\")";
  // The base classes must be known to pybind11 before ours are declared.
  py::module::import("torch.distributed");
  auto pg = py::class_<ProcessGroupCollectives, c10d::Backend, c10::intrusive_ptr<ProcessGroupCollectives>>(
      m, "ProcessGroupCollectives");
  // torch binds Backend.Options in newer releases (2.4 does not): derive from it where it is.
  if (py::hasattr(py::module::import("torch._C._distributed_c10d").attr("Backend"), "Options"))
    bindOptions(py::class_<CollOptions, c10d::Backend::Options, c10::intrusive_ptr<CollOptions>>(pg, "Options"));
  else bindOptions(py::class_<CollOptions, c10::intrusive_ptr<CollOptions>>(pg, "Options"));
  pg.def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                     const c10::intrusive_ptr<CollOptions>& options) {
           return c10::make_intrusive<ProcessGroupCollectives>(store, rank, size, options);
         }),
         py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("options"),
         py::call_guard<py::gil_scoped_release>())
      .def("enable_collectives_timing", &ProcessGroupCollectives::enableCollectivesTiming)
      .def_property_readonly("options", [](ProcessGroupCollectives& self) {
        return c10::static_intrusive_pointer_cast<CollOptions>(self.getBackendOptions());
      });
  // A positive limit is at least 1 ms (0 ms would mean none).
  m.def(
      "set_timeout",
      [](const c10::intrusive_ptr<ProcessGroupCollectives>& backend, double seconds) {
    TORCH_CHECK(std::isfinite(seconds) && seconds >= 0 && seconds <= 1e9, "torch_collectives.set_timeout: seconds ",
                seconds, ": must be 0 (none) to 1e9");
    backend->setTimeout(std::chrono::milliseconds(static_cast<int64_t>(std::ceil(seconds * 1000))));
      },
      py::call_guard<py::gil_scoped_release>());
  m.def("library_version", [] {
    int v = 0;
    collGetVersion(&v);
    return v;
  });
}

// The extension module torch_collectives._C: the process group class and the creator
// function that torch.distributed.Backend.register_backend calls (see __init__.py).
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include "process_group.h"

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
  m.doc() = "Collectives' c10d process group (backend name \"collectives\")";
  // The base class must be known to pybind11 before ours is declared.
  py::module::import("torch.distributed");
  py::class_<torch_collectives::ProcessGroupCollectives, c10d::ProcessGroup,
             c10::intrusive_ptr<torch_collectives::ProcessGroupCollectives>>(m, "ProcessGroupCollectives")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout) {
             return c10::make_intrusive<torch_collectives::ProcessGroupCollectives>(store, rank, size, timeout);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
           py::call_guard<py::gil_scoped_release>());
  m.def(
      "create_process_group",
      [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
         const std::chrono::duration<float>& timeout) {
    return c10::static_intrusive_pointer_cast<torch_collectives::ProcessGroupCollectives>(
        torch_collectives::createProcessGroup(store, rank, size, timeout));
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"), py::call_guard<py::gil_scoped_release>());
  m.def("set_timeout", [](const c10::intrusive_ptr<torch_collectives::ProcessGroupCollectives>& pg, double seconds) {
    collResult_t r = collCommSetTimeout(pg->comm(), seconds);
    TORCH_CHECK(r == collSuccess, "torch_collectives.set_timeout: ", collGetLastError(pg->comm()));
  });
  m.def("library_version", [] {
    int v = 0;
    collGetVersion(&v);
    return v;
  });
}

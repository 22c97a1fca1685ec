// The extension module fak._fak: registers every part and turns fak Status errors into the typed
// Python exceptions of fak.errors.
#include <nanobind/nanobind.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <cstdio>
#include <cstring>

#include "bindings.h"

namespace fak::python {

nb::ndarray<nb::numpy, float> LogitsArray(std::vector<float>&& logits, size_t rows) {
  auto* owned = new std::vector<float>(std::move(logits));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<float>*>(p); });
  const size_t cols = rows == 0 ? 0 : owned->size() / rows;
  if (rows == 1) {
    const size_t shape[1] = {owned->size()};
    return nb::ndarray<nb::numpy, float>(owned->data(), 1, shape, owner);
  }
  const size_t shape[2] = {rows, cols};
  return nb::ndarray<nb::numpy, float>(owned->data(), 2, shape, owner);
}

SegmentKind ParseSegmentKind(const std::string& name) {
  if (name == "system") return SegmentKind::kSystem;
  if (name == "user") return SegmentKind::kUser;
  if (name == "tool_result" || name == "tool") return SegmentKind::kToolResult;
  if (name == "assistant") return SegmentKind::kAssistant;
  throw StatusError(
      InvalidArgument("unknown segment kind '" + name + "' (expected system, user, tool_result or assistant)"));
}

PublicKey ParsePublicKey(const nb::object& key) {
  if (nb::isinstance<nb::bytes>(key)) {
    nb::bytes raw = nb::cast<nb::bytes>(key);
    if (raw.size() != 32)
      throw StatusError(InvalidArgument("public key: expected 32 raw bytes, got " + std::to_string(raw.size())));
    PublicKey out;
    std::memcpy(out.bytes.data(), raw.c_str(), 32);
    return out;
  }
  if (nb::isinstance<nb::str>(key)) return ValueOrThrow(PublicKey::FromHex(Utf8Of(key, "public key")));
  throw StatusError(InvalidArgument("public key: expected 64 hex characters (str) or 32 raw bytes"));
}

std::vector<int32_t> TokensOf(const nb::handle& tokens, const char* what) {
  std::vector<int32_t> out;
  if (nb::isinstance<nb::str>(tokens) || !nb::try_cast(tokens, out))
    throw StatusError(InvalidArgument(std::string(what) + ": expected a sequence of int token ids (int32)"));
  return out;
}

std::string UnencodableReason(nb::handle str) {
  const Py_ssize_t n = PyUnicode_GetLength(str.ptr());
  for (Py_ssize_t i = 0; i < n; ++i) {
    const Py_UCS4 c = PyUnicode_ReadChar(str.ptr(), i);
    if (c >= 0xD800 && c <= 0xDFFF) {
      char hex[16];
      std::snprintf(hex, sizeof hex, "\\u%04x", static_cast<unsigned>(c));
      return "is not valid Unicode: '" + std::string(hex) + "' at index " + std::to_string(i) +
             " is a lone surrogate, which has no UTF-8 form";
    }
  }
  return "has no UTF-8 form";
}

std::vector<std::string> Strings(const std::vector<Text>& texts) {
  return std::vector<std::string>(texts.begin(), texts.end());
}

std::string Utf8Of(nb::handle str, std::string_view what) {
  if (!PyUnicode_Check(str.ptr())) throw StatusError(InvalidArgument(std::string(what) + ": expected str"));
  Py_ssize_t size = 0;
  const char* utf8 = PyUnicode_AsUTF8AndSize(str.ptr(), &size);
  if (utf8 == nullptr) {
    PyErr_Clear();
    throw StatusError(InvalidArgument(std::string(what) + " " + UnencodableReason(str)));
  }
  return std::string(utf8, static_cast<size_t>(size));
}

namespace {

void TranslateStatusError(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const StatusError& e) {
    // Import on demand: errors are rare, and a cached module object would outlive the interpreter.
    nb::object errors = nb::module_::import_("fak.errors");
    nb::object cls = errors.attr("error_class")(std::string(StatusCodeName(e.status().code())));
    nb::object exc = cls(std::string(StatusCodeName(e.status().code())), std::string(e.status().message()));
    PyErr_SetObject(cls.ptr(), exc.ptr());
  }
}

}  // namespace
}  // namespace fak::python

NB_MODULE(_fak, m) {
  using namespace fak;
  using namespace fak::python;
  m.doc() = "fak's C++ core (nanobind); import the `fak` package instead of this module.";
  nb::register_exception_translator(TranslateStatusError);
  m.def(
      "version", [] { return std::string(LibraryVersion()); }, "The fak library version.");
  m.def(
      "kernel_tier", [] { return std::string(ActiveKernelTier()); },
      "The kernel tier in use (e.g. scalar, avx2, avx512_skx, avx512): part of the numeric regime.");
  m.def("supported_kernel_tiers", &SupportedKernelTiers, "Kernel tiers this CPU supports.");
  m.def(
      "set_kernel_tier", [](const Text& name) { ThrowIfError(SetKernelTier(name)); }, nb::arg("name"),
      "Pins the kernel tier for every later forward pass in this process.");
  m.def(
      "sha256", [](nb::bytes data) { return Digest::Of(data.c_str(), data.size()).Hex(); }, nb::arg("data"),
      "Hex sha256 of bytes: fak's SourceDigest of a text's UTF-8 bytes.");
  m.def(
      "decode_loop_seconds",
      [](const ModelRef& model, const std::vector<int32_t>& prompt, const std::vector<int32_t>& tokens) {
        nb::gil_scoped_release release;
        KVCache cache = model->model->NewCache();
        if (!prompt.empty()) ValueOrThrow(model->model->Prefill(&cache, prompt));
        const auto start = std::chrono::steady_clock::now();
        for (int32_t t : tokens) ValueOrThrow(model->model->Decode(&cache, t));
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      },
      nb::arg("model"), nb::arg("prompt"), nb::arg("tokens"),
      "Benchmark baseline: seconds the C++ Model::Decode loop takes over `tokens` after prefilling `prompt` "
      "(bench/python/decode_overhead.py compares Session.decode from Python against it).");
  BindModel(m);
  BindSession(m);
  BindEngine(m);
  BindStore(m);
  BindPlanner(m);
  BindRadix(m);
}

// The CPU decode kernels as torch operators (namespace edge_assistant), so that compiled code calls them
// through the dispatcher without Python in between. Built by cache/cpu_kernels.py.
#include <torch/library.h>

at::Tensor decode_attention(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                            const c10::optional<at::Tensor>& attended, double scaling);
at::Tensor one_row_linear(const at::Tensor& x, const at::Tensor& weight, const c10::optional<at::Tensor>& bias);
at::Tensor int8_linear(const at::Tensor& x, const at::Tensor& packed, const at::Tensor& weight_scale,
                       const c10::optional<at::Tensor>& bias, int64_t out_features);

TORCH_LIBRARY(edge_assistant, m) {
  m.def("decode_attention(Tensor query, Tensor key, Tensor value, Tensor? attended, float scaling) -> Tensor");
  m.def("one_row_linear(Tensor x, Tensor weight, Tensor? bias) -> Tensor");
  m.def("int8_linear(Tensor x, Tensor packed, Tensor weight_scale, Tensor? bias, int out_features) -> Tensor");
}

TORCH_LIBRARY_IMPL(edge_assistant, CPU, m) {
  m.impl("decode_attention", &decode_attention);
  m.impl("one_row_linear", &one_row_linear);
  m.impl("int8_linear", &int8_linear);
}

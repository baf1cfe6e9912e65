// device_cache: creation (validation + table upload), pool copies, error messages.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>
#include <utility>

#include <bgtq/cuda/tables.hpp>

#include "device_cache_impl.cuh"

namespace bgtq::cuda {

namespace detail {

namespace {
thread_local char g_last_error[512] = "";
}

void set_error(const char* msg) noexcept {
  std::snprintf(g_last_error, sizeof g_last_error, "%s", msg ? msg : "");
}

errc cuda_fail(cudaError_t e, const char* what, const char* file, int line) noexcept {
  char buf[512];
  std::snprintf(buf, sizeof buf, "%s failed: %s (%s) at %s:%d", what, cudaGetErrorString(e), cudaGetErrorName(e), file, line);
  set_error(buf);
  clear_pending_error();
  return errc::device_error;
}

errc arg_fail(errc code, const char* msg) noexcept {
  set_error(msg);
  return code;
}

}  // namespace detail

const char* last_error_message() noexcept { return detail::g_last_error; }

device_cache::device_cache() noexcept = default;
device_cache::~device_cache() = default;
device_cache::device_cache(device_cache&&) noexcept = default;
device_cache& device_cache::operator=(device_cache&&) noexcept = default;

namespace {

const cache_desc& empty_desc() {
  static const cache_desc d{};
  return d;
}

template <class T>
errc upload_table(T*& dst, const std::vector<T>& src) {
  if (src.empty()) return errc::ok;
  BGTQ_CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(&dst), src.size() * sizeof(T)));
  BGTQ_CUDA_TRY(cudaMemcpy(dst, src.data(), src.size() * sizeof(T), cudaMemcpyHostToDevice));
  return errc::ok;
}

errc build(const cache_desc& d, device_cache::impl& m) {
  m.desc = d;
  BGTQ_CUDA_TRY(cudaGetDevice(&m.device));
  BGTQ_CUDA_TRY(cudaDeviceGetAttribute(&m.sms, cudaDevAttrMultiProcessorCount, m.device));
  BGTQ_CUDA_TRY(cudaDeviceGetAttribute(&m.cc_major, cudaDevAttrComputeCapabilityMajor, m.device));
  BGTQ_CUDA_TRY(cudaDeviceGetAttribute(&m.smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, m.device));
  device_tables t = build_tables(d);
  for (int l = 0; l < d.layers; ++l) {
    std::string why;
    const mma_layer_info info = mma_layer_support(t, d, l, &why);
    if (info.ok && m.cc_major < 8) {
      why = "tensor-core decode: the device is older than sm_80 (no mma.sync m16n8k16 / cp.async)";
    } else if (info.ok && info.smem.bytes > m.smem_optin) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "tensor-core decode: %d bytes of shared memory per CTA needed, the device allows %d",
                    info.smem.bytes, m.smem_optin);
      why = buf;
    }  // (mma_layer_support leaves why empty when the layer is supported)
    m.mma.push_back(info);
    m.mma_why.push_back(why);
  }
  m.mma_per_sm = std::make_unique<std::atomic<int>[]>(static_cast<std::size_t>(d.layers));
  for (int l = 0; l < d.layers; ++l) m.mma_per_sm[static_cast<std::size_t>(l)].store(0);
  m.pool_bytes = t.pool_bytes;
  if (m.pool_bytes > 0) {
    BGTQ_CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(&m.pool), m.pool_bytes));
    BGTQ_CUDA_TRY(cudaMemset(m.pool, 0, m.pool_bytes));
  }
  if (errc e = upload_table(m.heads, t.heads); e != errc::ok) return e;
  if (errc e = upload_table(m.groups, t.groups); e != errc::ok) return e;
  if (errc e = upload_table(m.dims, t.dims); e != errc::ok) return e;
  if (errc e = upload_table(m.rot, t.rot); e != errc::ok) return e;
  if (errc e = upload_table(m.cent, t.cent); e != errc::ok) return e;
  if (errc e = upload_table(m.thr, t.thr); e != errc::ok) return e;
  if (errc e = upload_table(m.rot_coords, t.rot_coords); e != errc::ok) return e;
  m.mma_tables = build_mma_tables(t, d);
  if (errc e = upload_table(m.mma_groups, m.mma_tables.groups); e != errc::ok) return e;
  if (errc e = upload_table(m.mma_half, m.mma_tables.half); e != errc::ok) return e;
  if (errc e = upload_table(m.mma_cpos, m.mma_tables.cpos); e != errc::ok) return e;
  if (errc e = upload_table(m.mma_zmask, m.mma_tables.zmask); e != errc::ok) return e;
  if (errc e = upload_table(m.mma_stages, m.mma_tables.stages); e != errc::ok) return e;
  m.tables = std::move(t);
  return errc::ok;
}

}  // namespace

errc device_cache::create(const cache_desc& d, device_cache& out) noexcept {
  try {
    std::string msg;
    if (errc e = validate_desc(d, &msg); e != errc::ok) return detail::arg_fail(e, msg.c_str());
    auto m = std::make_unique<impl>();
    if (errc e = build(d, *m); e != errc::ok) return e;  // m frees what was allocated
    out.p_ = std::move(m);
    return errc::ok;
  } catch (const std::bad_alloc&) {
    return detail::arg_fail(errc::capacity_exhausted, "device_cache::create: host allocation failed");
  } catch (...) {
    return detail::arg_fail(errc::invalid_argument, "device_cache::create: unexpected exception");
  }
}

bool device_cache::valid() const noexcept { return p_ != nullptr; }
const cache_desc& device_cache::desc() const noexcept { return p_ ? p_->desc : empty_desc(); }
void* device_cache::pool() const noexcept { return p_ ? p_->pool : nullptr; }
std::size_t device_cache::pool_bytes() const noexcept { return p_ ? p_->pool_bytes : 0; }
int device_cache::sm_count() const noexcept { return p_ ? p_->sms : 0; }

bool device_cache::tensor_core_decode(int layer, const char** why) const noexcept {
  const char* r = nullptr;
  if (!p_) {
    r = "tensor-core decode: device_cache is empty";
  } else if (layer < 0 || layer >= p_->desc.layers) {
    r = "tensor-core decode: layer out of range";
  } else if (!p_->mma_why[static_cast<std::size_t>(layer)].empty()) {
    r = p_->mma_why[static_cast<std::size_t>(layer)].c_str();
  }
  if (why) *why = r ? r : "";
  return r == nullptr;
}

namespace {
bool head_ok(const device_cache::impl* m, int layer, int h) {
  return m && layer >= 0 && layer < m->desc.layers && h >= 0 && h < m->desc.kv_heads;
}
}  // namespace

std::size_t device_cache::arena_offset(int layer, int h) const noexcept {
  return head_ok(p_.get(), layer, h) ? static_cast<std::size_t>(p_->head(layer, h).offset) : 0;
}
std::size_t device_cache::page_part_bytes(int layer, int h) const noexcept {
  return head_ok(p_.get(), layer, h) ? p_->head(layer, h).page_bytes : 0;
}
std::size_t device_cache::value_offset(int layer, int h) const noexcept {
  return head_ok(p_.get(), layer, h) ? p_->head(layer, h).value_offset : 0;
}

errc device_cache::upload_pages(int layer, int h, int first, int pages, const void* host, void* stream) noexcept {
  BGTQ_ARG_CHECK(p_ != nullptr, errc::invalid_argument, "upload_pages: device_cache is empty");
  BGTQ_ARG_CHECK(head_ok(p_.get(), layer, h), errc::not_found, "upload_pages: no such (layer, kv_head)");
  BGTQ_ARG_CHECK(first >= 0 && pages >= 0 && static_cast<long long>(first) + pages <= p_->desc.max_pages,
                 errc::invalid_argument, "upload_pages: page range outside the pool");
  BGTQ_ARG_CHECK(host != nullptr || pages == 0, errc::invalid_argument, "upload_pages: null host pointer");
  if (pages == 0) return errc::ok;
  const head_meta& hm = p_->head(layer, h);
  std::uint8_t* dst = p_->pool + hm.offset + static_cast<std::size_t>(first) * hm.page_bytes;
  BGTQ_CUDA_TRY(cudaMemcpyAsync(dst, host, static_cast<std::size_t>(pages) * hm.page_bytes, cudaMemcpyHostToDevice,
                                as_stream(stream)));
  BGTQ_CUDA_TRY(cudaStreamSynchronize(as_stream(stream)));
  return errc::ok;
}

errc device_cache::download_page_part(int page, int layer, int h, void* host, void* stream) noexcept {
  BGTQ_ARG_CHECK(p_ != nullptr, errc::invalid_argument, "download_page_part: device_cache is empty");
  BGTQ_ARG_CHECK(head_ok(p_.get(), layer, h), errc::not_found, "download_page_part: no such (layer, kv_head)");
  BGTQ_ARG_CHECK(page >= 0 && page < p_->desc.max_pages, errc::invalid_argument, "download_page_part: page outside the pool");
  BGTQ_ARG_CHECK(host != nullptr, errc::invalid_argument, "download_page_part: null host pointer");
  const head_meta& hm = p_->head(layer, h);
  const std::uint8_t* src = p_->pool + hm.offset + static_cast<std::size_t>(page) * hm.page_bytes;
  BGTQ_CUDA_TRY(cudaMemcpyAsync(host, src, hm.page_bytes, cudaMemcpyDeviceToHost, as_stream(stream)));
  BGTQ_CUDA_TRY(cudaStreamSynchronize(as_stream(stream)));
  return errc::ok;
}

errc device_cache::clear(void* stream) noexcept {
  BGTQ_ARG_CHECK(p_ != nullptr, errc::invalid_argument, "clear: device_cache is empty");
  if (p_->pool_bytes > 0) BGTQ_CUDA_TRY(cudaMemsetAsync(p_->pool, 0, p_->pool_bytes, as_stream(stream)));
  return errc::ok;
}

split_plan device_cache::decode_plan(int batch, long long max_quantized, int splits) const noexcept {
  if (!p_) return split_plan{};
  const int G = p_->desc.q_heads / p_->desc.kv_heads;
  const int gm = heads_per_cta(G);
  const int chunks = (G + gm - 1) / gm;
  return plan_splits(batch * p_->desc.kv_heads * chunks, max_quantized, p_->sms, splits);
}

std::size_t device_cache::decode_workspace_bytes(int batch, int splits) const noexcept {
  if (!p_) return 0;
  return decode_workspace(batch, p_->desc.q_heads, p_->desc.head_dim, splits < 1 ? 1 : splits).bytes;
}

}  // namespace bgtq::cuda

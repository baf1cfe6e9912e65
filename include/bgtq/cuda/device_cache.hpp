#pragma once
//! @file cuda/device_cache.hpp
//! Device mirror of a packed Block-GTQ / TQ-MSE KV cache and its launchers: encode-append
//! and fused paged decode attention (library blockgtq_cuda, kernels/*.cu).
//!
//! Plain C++: no CUDA header is included, streams are passed as `void*` (a
//! cudaStream_t, nullptr = the default stream), every pointer named "device" is device
//! memory, every function is noexcept and returns a bgtq::errc (`device_error` when a
//! CUDA call failed: `last_error_message()` then names the call and CUDA's message).
//!
//! Byte layout (identical to the host kv_cache<gtq_pages, gtq_pages, bit_plane_layout>
//! of the same configuration, so pages can be copied either way):
//! \verbatim
//! // pool = [layer][kv_head] arenas; arena(l,h) = [page][page_bytes(l,h)];
//! //  page(l,h) = [key part: gtq_pages][value part: gtq_pages], 64-byte aligned parts;
//! //  gtq part = [group codes: bit planes [coord][plane][P/8 bytes]]... [radii [group][P]]
//! \endverbatim
//! The per-head plan (groups, widths, rotations, codebooks) is run-time data in device
//! tables, so one launch serves every KV head of a layer.
//!
//! Typical use (see docs/gpu.md):
//! @code
//! bgtq::cuda::device_cache dev;
//! if (bgtq::cuda::device_cache::create(bgtq::cuda::describe(host_cache), dev) != bgtq::errc::ok)
//!   std::fprintf(stderr, "%s\n", bgtq::cuda::last_error_message());
//! bgtq::cuda::encode_args e{.layer = 0, .tokens = n, .type = bgtq::cuda::dtype::f16,
//!                           .k = k_dev, .v = v_dev, .slot_mapping = slots_dev};
//! dev.encode_append(e, stream);
//! bgtq::cuda::decode_args d{...};  // queries, page tables, lengths, window, workspace
//! dev.decode_attention(d, stream);
//! @endcode

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "../core/error.hpp"
#include "kernel_math.hpp"

namespace bgtq::cuda {

//! Message of the last failure recorded by a bgtq::cuda function on this thread
//! ("" if none): the failing call or check and, for CUDA errors, cudaGetErrorString.
const char* last_error_message() noexcept;

namespace detail {
//! Records msg as last_error_message() and returns code (for the header-only helpers of
//! upload.hpp; the kernels' launchers use it too).
errc arg_fail(errc code, const char* msg) noexcept;
}  // namespace detail

//! One TQ-MSE group of a codec part, as uploaded (host description).
struct group_desc {
  int dim = 0;                   //!< n, even
  int bits = 0;                  //!< 1..8
  int coord_off = 0;             //!< offset of the group's coordinates in the part's coordinate space
  bool fp32_radius = false;      //!< radii stored as fp32 (else fp16)
  bool norm_correction = false;  //!< stored radius r / ||c(idx)||
  std::uint32_t region = 0;      //!< byte offset of the code region in the codec part
  std::uint32_t radii = 0;       //!< byte offset of this group's [P] radii in the codec part
  std::vector<int> dims;         //!< head dim of each coordinate (size n)
  std::vector<float> matrix;     //!< P row-major n x n (bgtq::dense_matrix of the rotation)
  std::vector<float> centroids;  //!< 2^bits centroids
  std::vector<float> thresholds; //!< 2^bits - 1 ascending thresholds
};

//! The key or value part of one (layer, KV head).
struct codec_desc {
  std::vector<group_desc> groups;  //!< in page order
  std::uint32_t bytes = 0;         //!< bytes of the part (64-byte multiple)
};

//! Everything the device needs to mirror a host cache.
struct cache_desc {
  int layers = 0, kv_heads = 0, q_heads = 0, head_dim = 0;
  int page_tokens = 0;  //!< P, a multiple of 64
  int max_pages = 0;    //!< pool size in pages (each page spans all layers and heads)
  std::vector<codec_desc> keys, values;  //!< [layer * kv_heads + h]
};

//! Arguments of encode_append: quantize new tokens into pages.
struct encode_args {
  int layer = 0;                             //!< layer to write
  int tokens = 0;                            //!< number of new tokens (may be 0)
  dtype type = dtype::f16;                   //!< element type of k and v
  const void* k = nullptr;                   //!< device [tokens][kv_heads][head_dim] post-RoPE keys
  const void* v = nullptr;                   //!< device [tokens][kv_heads][head_dim] values
  const std::int64_t* slot_mapping = nullptr;  //!< device [tokens]: page * P + slot; < 0 skips the token
  unsigned long long* nonfinite = nullptr;   //!< optional device counter of non-finite rows (stored as zero)
  unsigned long long* clamped = nullptr;     //!< optional device counter of clamped radii (encode_stats::clamped_radii)
};

//! Which split kernel decode_attention runs (docs/gpu.md). Both write the same partials
//! and share the query rotation and the merge.
enum class decode_path : int {
  //! fp32 FMAs on CUDA cores: matches CPU decode_attention within 1e-4 of max |out|.
  cuda_cores = 0,
  //! mma.sync m16n8k16 (sm_80+): fp16 centroids, fp16 scaled queries and fp16 weights x
  //! radii, fp32 accumulation; within 3e-3 of max |out| of the CPU on the device checks'
  //! data (the precision class of fp16 attention; the 2-4-bit codes themselves are ~100x
  //! less accurate). errc::unsupported where the layer or device
  //! cannot use it (mma_layer_support names why).
  tensor_cores = 1,
  //! tensor_cores where the layer and the device support it, else cuda_cores; also
  //! cuda_cores when the tensor-core kernel cannot be planned at decode time (its
  //! occupancy query fails or reports 0 CTAs per SM, or its shared-memory limit cannot be
  //! raised), where tensor_cores returns that error. decode_args::tensor_cores_used says
  //! which kernel ran.
  automatic = 2,
};

//! Arguments of decode_attention: one query token per sequence, all heads of a layer.
//!
//! Window buffers (the fp16 sink + recent tokens, which are not in pages):
//! `// window_k, window_v: [batch][kv_heads][window_cap][head_dim] fp16 bits; rows
//! //  [0, window_len[b]) are used, in any order (attention is order-free)`
struct decode_args {
  int layer = 0;
  int batch = 0;                          //!< B sequences
  dtype q_type = dtype::f32;              //!< f32, f16 or bf16
  const void* q = nullptr;                //!< device [B][q_heads][head_dim] post-RoPE queries
  float* out = nullptr;                   //!< device [B][q_heads][head_dim] outputs
  const int* page_table = nullptr;        //!< device [B][max_pages_per_seq] page ids (may be null when max_quantized is 0)
  int max_pages_per_seq = 0;              //!< row stride of page_table
  const int* quantized = nullptr;         //!< device [B] tokens held in pages (the first ones of each table)
  long long max_quantized = 0;            //!< host: an upper bound of quantized[b] (sizes the split plan)
  const std::uint16_t* window_k = nullptr;  //!< device fp16 window keys (null: no window)
  const std::uint16_t* window_v = nullptr;  //!< device fp16 window values
  const int* window_len = nullptr;        //!< device [B] window rows used (null: no window)
  int window_cap = 0;                     //!< window rows per (sequence, head)
  float scale = 0.0f;                     //!< logit scale, 0 = 1/sqrt(head_dim); must be finite and >= 0
  int splits = 0;                         //!< 0 = choose from the work; > 0 forces a count
  void* workspace = nullptr;              //!< device scratch of decode_workspace_bytes(batch, splits) bytes, 256-byte aligned (as cudaMalloc returns)
  std::size_t workspace_bytes = 0;
  //! Optional device counter, incremented once per (sequence, query head) whose query
  //! has a NaN or Inf element or whose scores could overflow float (the CPU's guard:
  //! norm above max_query_norm, attention/softmax.hpp); such a query head gets NaN
  //! outputs (the launch is asynchronous, so it cannot be an error code as on the CPU).
  unsigned long long* nonfinite = nullptr;
  //! The split kernel (cuda_cores: the exact path; see decode_path).
  decode_path path = decode_path::cuda_cores;
  //! Optional host pointers, set when the launch is enqueued: the split count it runs
  //! (the tensor-core kernel plans one wave of its own, at most decode_plan's count) and
  //! whether the tensor-core kernel runs (automatic may fall back).
  int* splits_used = nullptr;
  bool* tensor_cores_used = nullptr;
};

//! A device mirror of a host gtq/bit-plane cache: the page pool and the per-head
//! metadata tables. Move-only; the device memory is freed by the destructor.
class device_cache {
 public:
  device_cache() noexcept;
  ~device_cache();
  device_cache(device_cache&&) noexcept;
  device_cache& operator=(device_cache&&) noexcept;
  device_cache(const device_cache&) = delete;
  device_cache& operator=(const device_cache&) = delete;

  //! Validates `d`, uploads its tables and allocates a zeroed pool of d.max_pages pages
  //! on the current device. `out` is replaced on success and untouched on failure.
  //! Errors: invalid_argument / unsupported (head_dim > 256, more than 16 groups in a
  //! part, bad offsets, ...), device_error.
  static errc create(const cache_desc& d, device_cache& out) noexcept;

  //! True after a successful create.
  bool valid() const noexcept;
  //! The description it was made from (empty when not valid).
  const cache_desc& desc() const noexcept;
  //! Device pointer to the pool.
  void* pool() const noexcept;
  //! Pool size in bytes.
  std::size_t pool_bytes() const noexcept;
  //! Byte offset of the (layer, h) arena in the pool (as kv_cache::page_ptr(0, l, h) - page_ptr(0, 0, 0)).
  std::size_t arena_offset(int layer, int h) const noexcept;
  //! Bytes of one page part of (layer, h).
  std::size_t page_part_bytes(int layer, int h) const noexcept;
  //! Offset of the value part inside a page part of (layer, h).
  std::size_t value_offset(int layer, int h) const noexcept;
  //! Number of SMs of the device the cache lives on.
  int sm_count() const noexcept;
  //! True when decode_attention of `layer` can take decode_path::tensor_cores on this
  //! device; otherwise false, with the reason in *why (if given).
  bool tensor_core_decode(int layer, const char** why = nullptr) const noexcept;

  //! Copies `pages` host page parts of (layer, h), starting at page `first`, into the pool
  //! (host: pages * page_part_bytes bytes). Synchronous.
  errc upload_pages(int layer, int h, int first, int pages, const void* host, void* stream = nullptr) noexcept;
  //! Copies one page part of (layer, h) to host memory (page_part_bytes bytes). Synchronous.
  errc download_page_part(int page, int layer, int h, void* host, void* stream = nullptr) noexcept;
  //! Sets the whole pool to zero (asynchronous on `stream`).
  errc clear(void* stream = nullptr) noexcept;

  //! Encodes new tokens into their page slots: per (token, KV head) and group, gather,
  //! rotate, quantize, pack bit planes, store the radius: the bytes the CPU encoder
  //! writes for the same float values (see docs/gpu.md for the exact guarantee).
  //! Slots must be distinct within a call. Non-finite rows are stored as zero vectors
  //! (counted in a.nonfinite when given); radii beyond the stored range (fp16 65504,
  //! fp32 2^100) are clamped, direction kept (counted in a.clamped when given); a
  //! sub-vector of norm above 2^100 is rotated from the CPU's exact power-of-two scaled
  //! copy, so it cannot overflow. Asynchronous on `stream`.
  errc encode_append(const encode_args& a, void* stream = nullptr) noexcept;

  //! Split plan a decode launch of this shape would use (a.splits == 0).
  split_plan decode_plan(int batch, long long max_quantized, int splits = 0) const noexcept;
  //! Workspace bytes a decode launch needs for `batch` sequences split `splits` ways.
  std::size_t decode_workspace_bytes(int batch, int splits) const noexcept;

  //! Fused decode attention over pages and the fp16 window (flash-decoding): three
  //! launches on `stream` (rotate queries, split scan, merge). Nothing decoded is
  //! written to global memory; only per-split (m, l, accumulator) partials go to the
  //! workspace. Sequences with no token at all get a zero output; a query head whose
  //! query has a NaN or Inf element, or scores that could overflow float, gets NaN
  //! outputs and is counted in a.nonfinite.
  //! Errors: invalid_argument (also for a NaN, Inf or negative a.scale, an unknown dtype
  //! or path, checked even for batch 0; max_quantized above INT_MAX; a workspace not
  //! 256-byte aligned), not_found, unsupported, device_error. Asynchronous.
  errc decode_attention(const decode_args& a, void* stream = nullptr) noexcept;

  struct impl;  //!< private (kernels/device_cache_impl.cuh)
  //! The implementation (for the kernels' translation units).
  impl* get() const noexcept { return p_.get(); }

 private:
  std::unique_ptr<impl> p_;
};

//! Fills n elements of device memory with uniform random values in [lo, hi) drawn from
//! Philox (bgtq::philox4x32, key = seed, counter = element index / 4): for benchmarks.
errc fill_uniform(void* dst, std::size_t n, dtype type, std::uint64_t seed, float lo, float hi,
                  void* stream = nullptr) noexcept;

//! Widens n device elements of `type` (f32, f16 or bf16) to fp32 in dst with the
//! conversion every kernel applies to its inputs (load_element: exact; fp16 through the
//! device's cvt.f32.f16): for tests and tools. Asynchronous.
errc to_float(const void* src, std::size_t n, dtype type, float* dst, void* stream = nullptr) noexcept;

//! Narrows n fp32 device elements to f16 or bf16 bits in dst (std::uint16_t) with the
//! conversions the kernels store with (float_to_half_bits: the device's cvt.rn.f16.f32;
//! float_to_bf16_bits): round to nearest even. For tests and tools. Asynchronous.
errc from_float(const float* src, std::size_t n, dtype type, void* dst, void* stream = nullptr) noexcept;

}  // namespace bgtq::cuda

#include <catch2/catch.hpp>

#include <bgtq/core/half.hpp>
#include <bgtq/core/rng.hpp>
#include <bgtq/io/npy.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "common.hpp"
#include "io/io_util.hpp"

#include <sys/stat.h>

using bgtq::errc;
using bgtq::npy_dtype;
using bgtq_test::require_error;

namespace {

using bytes_t = std::vector<unsigned char>;

bytes_t to_bytes(const std::string& s) { return bytes_t(s.begin(), s.end()); }

//! A .npy image with header text `dict` (padded by hand per the spec: spaces and '\n' to
//! a multiple of 64) in format `major`, followed by `data_bytes` bytes.
bytes_t raw_npy(const std::string& dict, std::size_t data_bytes, int major = 1) {
  const std::size_t prefix = major == 1 ? 10 : 12;
  std::size_t total = dict.size() + 1;
  while ((prefix + total) % 64 != 0) ++total;
  std::string s = std::string("\x93NUMPY", 6) + static_cast<char>(major) + '\0';
  for (std::size_t b = 0; b < prefix - 8; ++b) s += static_cast<char>((total >> (8 * b)) & 0xFF);
  s += dict;
  s += std::string(total - dict.size() - 1, ' ');
  s += '\n';
  bytes_t out = to_bytes(s);
  for (std::size_t i = 0; i < data_bytes; ++i) out.push_back(static_cast<unsigned char>(i * 7 + 1));
  return out;
}

std::string dict_of(const std::string& descr, const std::string& shape, const std::string& fortran = "False") {
  return "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape + ", }";
}

bgtq::npy_array parse(const bytes_t& b, const std::string& name = "t.npy") { return bgtq::parse_npy(b.data(), b.size(), name); }

std::vector<float> random_values(std::uint64_t seed, std::size_t n) {
  bgtq::counter_rng r(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(r.normal() * 3.0);
  return v;
}

}  // namespace

TEST_CASE("npy header bytes match NumPy's np.save byte for byte", "[io][npy]") {
  // Built by hand from the spec (NumPy >= 1.24 format.py): magic, version 1.0, u16 header
  // length, the dict, 21 - len(str(shape[0])) growth spaces, pad spaces, '\n'; data at 128.
  {
    const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    REQUIRE(dict.size() == 59);
    const std::string expect = std::string("\x93NUMPY\x01\x00\x76\x00", 10) + dict + std::string(20 + 38, ' ') + "\n";
    REQUIRE(expect.size() == 128);
    const std::vector<float> v = {1.f, 2.f, 3.f, -4.f, 0.5f, 1e-3f};
    const bytes_t b = bgtq::npy_bytes(v.data(), {2, 3});
    REQUIRE(b.size() == 128 + 24);
    CHECK(std::string(b.begin(), b.begin() + 128) == expect);
    float back[6];
    std::memcpy(back, b.data() + 128, 24);  // little-endian host
    for (int i = 0; i < 6; ++i) CHECK(back[i] == v[static_cast<std::size_t>(i)]);
  }
  {  // 0-d: no growth padding
    const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (), }";
    const std::string expect = std::string("\x93NUMPY\x01\x00\x76\x00", 10) + dict + std::string(62, ' ') + "\n";
    const float x = 2.5f;
    const bytes_t b = bgtq::npy_bytes(&x, {});
    CHECK(std::string(b.begin(), b.begin() + 128) == expect);
    CHECK(b.size() == 132);
  }
  {  // 1-d f16: "(5,)" and 2-byte little-endian halves
    const std::string dict = "{'descr': '<f2', 'fortran_order': False, 'shape': (5,), }";
    const std::string expect = std::string("\x93NUMPY\x01\x00\x76\x00", 10) + dict + std::string(20 + 40, ' ') + "\n";
    const std::vector<float> v = {1.f, -2.f, 0.f, 65504.f, 0.333333f};
    const bytes_t b = bgtq::npy_bytes(v.data(), {5}, npy_dtype::f16);
    CHECK(std::string(b.begin(), b.begin() + 128) == expect);
    REQUIRE(b.size() == 138);
    CHECK(b[128] == 0x00);
    CHECK(b[129] == 0x3C);  // 1.0 = 0x3C00
    CHECK(b[130] == 0x00);
    CHECK(b[131] == 0xC0);  // -2.0 = 0xC000
    CHECK(b[134] == 0xFF);
    CHECK(b[135] == 0x7B);  // 65504 = 0x7BFF
  }
  {  // already aligned before the newline: NumPy pads a full 64 spaces
    const std::vector<std::size_t> shape(16, 10000);
    std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
    for (int i = 0; i < 16; ++i) dict += i ? ", 10000" : "10000";
    dict += "), }";
    REQUIRE(dict.size() == 165);
    const std::string expect = std::string("\x93NUMPY\x01\x00\xf6\x00", 10) + dict + std::string(16 + 64, ' ') + "\n";
    REQUIRE(expect.size() == 256);
    const bytes_t h = bgtq::detail::npy_header_bytes(shape, npy_dtype::f32);
    CHECK(std::string(h.begin(), h.end()) == expect);
  }
  {  // versions 2.0 and 3.0: u32 length, data still at a multiple of 64
    const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    for (int major : {2, 3}) {
      const std::string expect = std::string("\x93NUMPY", 6) + static_cast<char>(major) + std::string("\0\x74\0\0\0", 5) + dict +
                                 std::string(20 + 36, ' ') + "\n";
      REQUIRE(expect.size() == 128);
      const bytes_t h = bgtq::detail::npy_header_bytes({2, 3}, npy_dtype::f32, major);
      CHECK(std::string(h.begin(), h.end()) == expect);
    }
  }
}

TEST_CASE("npy round trip of random arrays, f32 and f16, rank 0..4, zero-sized dims", "[io][npy]") {
  bgtq::counter_rng r(2024);
  int cases = 0;
  for (int rank = 0; rank <= 4; ++rank) {
    for (int rep = 0; rep < 12; ++rep) {
      std::vector<std::size_t> shape(static_cast<std::size_t>(rank));
      for (auto& s : shape) s = r.below(6);  // includes 0
      if (rep < 4)
        for (auto& s : shape) s = s + 1;  // some without zero dims
      std::size_t n = 1;
      for (auto s : shape) n *= s;
      const std::vector<float> v = random_values(static_cast<std::uint64_t>(rank * 100 + rep), n);
      for (npy_dtype dt : {npy_dtype::f32, npy_dtype::f16}) {
        for (int major : {0, 1, 2, 3}) {
          INFO("shape " << bgtq::detail::shape_repr(shape) << " dtype " << bgtq::to_string(dt) << " major " << major);
          const bytes_t b = bgtq::detail::npy_bytes_version(v.data(), shape, dt, major);
          const bgtq::npy_array a = parse(b);
          CHECK(a.shape == shape);
          CHECK(a.dtype == dt);
          CHECK(a.size() == n);
          REQUIRE(a.data.size() == n);
          for (std::size_t i = 0; i < n; ++i) {
            const float expect = dt == npy_dtype::f32 ? v[i] : bgtq::half_bits_to_float(bgtq::float_to_half_bits(v[i]));
            REQUIRE(a.data[i] == expect);
          }
          ++cases;
        }
      }
    }
  }
  CHECK(cases == 5 * 12 * 2 * 4);
}

TEST_CASE("write_npy / read_npy round trip through files, including the chunked paths", "[io][npy]") {
  bgtq_test::temp_dir dir("npy_rt");
  // > 65536 elements exercises the chunked conversion in both directions
  const std::vector<std::size_t> shape = {3, 257, 97};
  const std::vector<float> v = random_values(7, 3 * 257 * 97);
  for (npy_dtype dt : {npy_dtype::f32, npy_dtype::f16}) {
    const std::string path = dir.file(std::string("a_") + bgtq::to_string(dt) + ".npy");
    bgtq::write_npy(path, v.data(), shape, dt);
    CHECK(bgtq_test::read_bytes(path) == bgtq::npy_bytes(v.data(), shape, dt));
    const bgtq::npy_array a = bgtq::read_npy(path);
    CHECK(a.shape == shape);
    CHECK(a.dtype == dt);
    const bgtq::npy_array m = parse(bgtq_test::read_bytes(path));
    CHECK(m.data == a.data);
    for (std::size_t i = 0; i < v.size(); ++i) {
      const float expect = dt == npy_dtype::f32 ? v[i] : bgtq::half_bits_to_float(bgtq::float_to_half_bits(v[i]));
      REQUIRE(a.data[i] == expect);
    }
  }
  // empty and 0-d arrays
  bgtq::write_npy(dir.file("e.npy"), nullptr, {0, 4});
  CHECK(bgtq::read_npy(dir.file("e.npy")).shape == std::vector<std::size_t>{0, 4});
  const float x = -1.25f;
  bgtq::write_npy(dir.file("s.npy"), &x, {}, npy_dtype::f16);
  const bgtq::npy_array s = bgtq::read_npy(dir.file("s.npy"));
  CHECK(s.shape.empty());
  CHECK(s.size() == 1);
  REQUIRE(s.data.size() == 1);
  CHECK(s.data[0] == -1.25f);
}

TEST_CASE("write_npy is atomic: no file on failure, clean replacement on success", "[io][npy]") {
  bgtq_test::temp_dir dir("npy_atomic");
  const std::vector<float> a = {1, 2, 3}, b = {4, 5, 6, 7};
  // missing target directory: io_error, nothing created
  const std::string missing = dir.file("no_such_dir/x.npy");
  require_error([&] { bgtq::write_npy(missing, a.data(), {3}); }, errc::io_error, "no_such_dir");
  CHECK_FALSE(std::filesystem::exists(missing));
  CHECK(dir.entries().empty());
  // invalid arguments: nothing written, an existing file is left alone
  const std::string path = dir.file("x.npy");
  bgtq::write_npy(path, a.data(), {3});
  const bytes_t before = bgtq_test::read_bytes(path);
  require_error([&] { bgtq::write_npy(path, nullptr, {3}); }, errc::invalid_argument, "null data");
  require_error([&] { bgtq::write_npy(path, a.data(), {std::size_t(1) << 40, std::size_t(1) << 40}); }, errc::invalid_argument,
                "too large");
  CHECK(bgtq_test::read_bytes(path) == before);
  // replacement: the new content, and no temporary left behind
  bgtq::write_npy(path, b.data(), {2, 2});
  const bgtq::npy_array r = bgtq::read_npy(path);
  CHECK(r.shape == std::vector<std::size_t>{2, 2});
  CHECK(r.data == b);
  CHECK(dir.entries() == std::vector<std::string>{"x.npy"});
}

TEST_CASE("several arrays through atomic_write_files: all or none, and one file named twice is refused", "[io][npy]") {
  bgtq_test::temp_dir dir("npy_atomic_set");
  const std::vector<float> a = {1, 2, 3}, b = {4, 5};
  const std::string qa = dir.file("q.npy"), ka = dir.file("k.npy"), va = dir.file("v.npy");
  // the last target is a directory: refused before anything is written (no q.npy, k.npy)
  std::filesystem::create_directory(va);
  require_error([&] { bgtq::atomic_write_files({bgtq::npy_output(qa, a.data(), {3}), bgtq::npy_output(ka, b.data(), {2}),
                                                bgtq::npy_output(va, a.data(), {3})}); },
                errc::io_error, "v.npy': it is a directory");
  CHECK(dir.entries() == std::vector<std::string>{"v.npy"});
  std::filesystem::remove(va);
  // one file named twice, also through "./" and "sub/..": refused, nothing written
  std::filesystem::create_directory(dir.file("sub"));
  for (const std::string& twin : {qa, dir.file("./q.npy"), dir.file("sub/../q.npy")})
    require_error([&] { bgtq::atomic_write_files({bgtq::npy_output(qa, a.data(), {3}), bgtq::npy_output(twin, b.data(), {2})}); },
                  errc::invalid_argument, "two outputs name the same file");
  CHECK(dir.entries() == std::vector<std::string>{"sub"});
  // relative spellings of a file not there yet, against each other and the absolute one
  // ("q.npy" was left relative by weakly_canonical and compared unequal: the second
  // output replaced the first)
  {
    const std::filesystem::path cwd = std::filesystem::current_path();
    std::filesystem::current_path(dir.file("sub"));
    const std::vector<std::pair<std::string, std::string>> twins = {
        {"q.npy", "./q.npy"}, {"q.npy", dir.file("sub/q.npy")}, {"q.npy", "../sub/q.npy"}, {"new/../q.npy", "q.npy"}};
    for (const auto& [x, y] : twins) {
      INFO(x << " and " << y);
      CHECK(bgtq::detail::same_target(x, y));
      CHECK(bgtq::detail::same_target(y, x));
    }
    CHECK_FALSE(bgtq::detail::same_target("q.npy", "../q.npy"));
    CHECK_FALSE(bgtq::detail::same_target("q.npy", "k.npy"));
    bool refused = false;
    try {
      bgtq::atomic_write_files({bgtq::npy_output("q.npy", a.data(), {3}), bgtq::npy_output("./q.npy", b.data(), {2})});
    } catch (const bgtq::error& e) {
      refused = e.code() == errc::invalid_argument;
    }
    std::filesystem::current_path(cwd);
    CHECK(refused);
  }
  CHECK(dir.entries() == std::vector<std::string>{"sub"});
  CHECK(std::filesystem::is_empty(dir.file("sub")));
  // success: every file complete
  bgtq::atomic_write_files({bgtq::npy_output(qa, a.data(), {3}), bgtq::npy_output(ka, b.data(), {2})});
  CHECK(bgtq::read_npy(qa).data == a);
  CHECK(bgtq::read_npy(ka).data == b);
  // the shape errors of npy_bytes come from npy_output itself, before any file is touched
  require_error([&] { (void)bgtq::npy_output(va, nullptr, {3}); }, errc::invalid_argument, "null data");
}

TEST_CASE("atomic_write_files: a failure after the first temporary leaves no temporary behind", "[io][npy]") {
  // the earlier outputs' temporaries exist when a later one fails: both the missing
  // directory of the second target and a throwing second writer must remove them all
  bgtq_test::temp_dir dir("atomic_cleanup");
  for (int k = 0; k < 2; ++k) {
    INFO((k == 0 ? "second target's directory is missing" : "second writer throws"));
    const std::vector<bgtq::output_file> files = {
        {dir.file("a.bin"), [](std::ostream& os) { os << "abc"; }, true},
        {k == 0 ? dir.file("nodir/b.bin") : dir.file("b.bin"),
         [k](std::ostream& os) {
           if (k == 1) throw std::runtime_error("writer failed");
           os << "x";
         },
         true}};
    REQUIRE_THROWS(bgtq::atomic_write_files(files));
    CHECK(dir.entries().empty());
  }
}

TEST_CASE("atomic_write_files: a failed write names the output, not its removed temporary", "[io][npy]") {
  // a full disk shows as a stream that went bad while writing; the message used to name
  // "out.bin.tmp.<random>", a file that no longer exists when the user reads it
  bgtq_test::temp_dir dir("atomic_message");
  const std::string out = dir.file("out.bin");
  bgtq::atomic_write_file(out, [](std::ostream& os) { os << "old"; });
  const auto read_text = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const auto failing = [](std::ostream& os) {
    os << "partial";
    os.setstate(std::ios::badbit);
  };
  for (const bool two : {false, true}) {
    INFO((two ? "second of two outputs" : "one output"));
    const std::string other = dir.file("other.bin");
    std::string msg;
    try {
      if (two)
        bgtq::atomic_write_files({{other, [](std::ostream& os) { os << "x"; }, true}, {out, failing, true}});
      else
        bgtq::atomic_write_file(out, failing);
    } catch (const bgtq::error& e) {
      CHECK(e.code() == errc::io_error);
      msg = e.what();
    }
    INFO(msg);
    CHECK(msg.find("write to '" + out + "' failed (disk full?) ('" + out + "' is unchanged; its temporary '" + out + ".tmp.") !=
          std::string::npos);
    CHECK(msg.find("' was removed)") != std::string::npos);
    CHECK(read_text(out) == "old");
    CHECK(dir.entries() == std::vector<std::string>{"out.bin"});
  }
}

TEST_CASE("atomic_write_files: symlinks are followed, a FIFO is written in place, an empty path is refused", "[io][npy]") {
  namespace fs = std::filesystem;
  bgtq_test::temp_dir dir("atomic_targets");
  const auto write_abc = [](std::ostream& os) { os << "abc"; };
  const auto slurp = [](const std::string& path) {  // no Catch2 macros: also runs on the reader thread
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  // a symlink: the file it names is replaced, the link stays a link
  {
    std::ofstream(dir.file("real.bin")) << "old";
    fs::create_symlink(dir.file("real.bin"), dir.file("link.bin"));
    bgtq::atomic_write_file(dir.file("link.bin"), write_abc);
    CHECK(fs::is_symlink(dir.file("link.bin")));
    CHECK(slurp(dir.file("real.bin")) == "abc");
    bgtq::check_output_path(dir.file("link.bin"), "-o");  // and it passes the early check
  }
  // a symlink to a file not there yet (relative, through a second link): the file is
  // created where the last link points, both links stay links
  {
    fs::create_directory(dir.file("sub"));
    fs::create_symlink("sub/made.bin", dir.file("hop.bin"));
    fs::create_symlink("hop.bin", dir.file("dangling.bin"));
    bgtq::check_output_path(dir.file("dangling.bin"), "-o");
    bgtq::atomic_write_file(dir.file("dangling.bin"), write_abc);
    CHECK(fs::is_symlink(dir.file("dangling.bin")));
    CHECK(fs::is_symlink(dir.file("hop.bin")));
    CHECK(slurp(dir.file("sub/made.bin")) == "abc");
    // two outputs through links to one new file are one target
    require_error([&] { bgtq::atomic_write_files({{dir.file("dangling.bin"), write_abc, true}, {dir.file("sub/made.bin"), write_abc, true}}); },
                  errc::invalid_argument, "two outputs name the same file");
    // into a directory that does not exist: the early check names it
    fs::create_symlink("nowhere/x.bin", dir.file("lost.bin"));
    require_error([&] { bgtq::check_output_path(dir.file("lost.bin"), "-o"); }, errc::io_error, "nowhere' does not exist");
    // a cycle of links: an error, not a hang
    fs::create_symlink("loop_b", dir.file("loop_a"));
    fs::create_symlink("loop_a", dir.file("loop_b"));
    require_error([&] { bgtq::atomic_write_file(dir.file("loop_a"), write_abc); }, errc::io_error, "too many levels of symbolic links");
    for (const char* f : {"dangling.bin", "hop.bin", "lost.bin", "loop_a", "loop_b", "sub/made.bin"}) fs::remove(dir.file(f));
    fs::remove(dir.file("sub"));
  }
  // a FIFO (as a device would be): written in place, still a FIFO afterwards, and the
  // regular output of the same call still goes through its temporary
  {
    const std::string fifo = dir.file("pipe");
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    std::string got;
    std::thread reader([&] { got = slurp(fifo); });
    bgtq::check_output_path(fifo, "-o");
    bgtq::atomic_write_files({{fifo, write_abc, true}, {dir.file("plain.bin"), [](std::ostream& os) { os << "xyz"; }, true}});
    reader.join();
    CHECK(got == "abc");
    CHECK(fs::is_fifo(fifo));
    CHECK(slurp(dir.file("plain.bin")) == "xyz");
  }
  std::vector<std::string> names = dir.entries();
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"link.bin", "pipe", "plain.bin", "real.bin"});
  // an empty path: refused before anything is written
  require_error([&] { bgtq::atomic_write_files({{dir.file("new.bin"), write_abc, true}, {"", write_abc, true}}); },
                errc::invalid_argument, "an output path is empty");
  require_error([&] { bgtq::check_output_path("", "--json-out"); }, errc::invalid_argument, "--json-out: the output path is empty");
  CHECK(!fs::exists(dir.file("new.bin")));
  // a file where the directory should be is named as such
  require_error([&] { bgtq::check_output_path(dir.file("real.bin/x"), "-o"); }, errc::io_error, "real.bin' is not a directory");
}

TEST_CASE("remove_pending_temporaries removes the temporaries being written, and only those", "[io][npy]") {
  namespace fs = std::filesystem;
  bgtq_test::temp_dir dir("pending_tmp");
  const std::string a = dir.file("a.tmp.1"), b = dir.file("b.tmp.2"), kept = dir.file("kept.bin");
  for (const std::string& f : {a, b, kept}) std::ofstream(f) << "x";
  {
    const bgtq::detail::pending_temporary pa(a);
    {
      const bgtq::detail::pending_temporary pb(b);
    }  // b released: no longer pending
    bgtq::remove_pending_temporaries();  // what bgtq's SIGINT / SIGTERM handler calls
    CHECK(!fs::exists(a));
    CHECK(fs::exists(b));
    CHECK(fs::exists(kept));
  }
  // while a writer runs, its temporary is pending (a writer that looks for it and removes
  // it the way the handler would): the rename then fails and the target stays absent
  const std::string target = dir.file("out.bin");
  require_error(
      [&] {
        bgtq::atomic_write_file(target, [&](std::ostream& os) {
          os << "abc";
          os.flush();
          bgtq::remove_pending_temporaries();
        });
      },
      errc::io_error, "cannot rename");
  CHECK(!fs::exists(target));
  std::vector<std::string> names = dir.entries();
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"b.tmp.2", "kept.bin"});
  // every slot is free again: a full table of registrations works
  std::vector<std::unique_ptr<bgtq::detail::pending_temporary>> many;
  for (int i = 0; i < bgtq::detail::max_pending_temporaries; ++i) {
    const std::string f = dir.file("m" + std::to_string(i));
    std::ofstream(f) << "x";
    many.push_back(std::make_unique<bgtq::detail::pending_temporary>(f));
  }
  bgtq::remove_pending_temporaries();
  for (int i = 0; i < bgtq::detail::max_pending_temporaries; ++i) CHECK(!fs::exists(dir.file("m" + std::to_string(i))));
}

TEST_CASE("npy preamble errors: magic, version, header length, truncation", "[io][npy]") {
  const std::vector<float> v = {1, 2, 3, 4, 5, 6};
  const bytes_t good = bgtq::npy_bytes(v.data(), {2, 3});
  {
    bytes_t b = good;
    b[2] = 'X';
    require_error([&] { parse(b, "k.npy"); }, errc::format_error, "k.npy: not a .npy file: bad magic at offset 2");
  }
  {
    const bytes_t b = to_bytes("PK\x03\x04 a zip");
    require_error([&] { parse(b); }, errc::format_error, "bad magic at offset 0");
  }
  require_error([&] { bgtq::parse_npy("", 0, "e.npy"); }, errc::format_error, "e.npy: empty file");
  for (std::size_t n : {1u, 5u, 7u}) require_error([&] { parse(bytes_t(good.begin(), good.begin() + static_cast<long>(n))); }, errc::format_error, "truncated");
  {
    bytes_t b = good;
    b[6] = 4;
    require_error([&] { parse(b); }, errc::format_error, "unsupported .npy format version 4.0 at offset 6");
    b[6] = 1;
    b[7] = 1;
    require_error([&] { parse(b); }, errc::format_error, "version 1.1");
    b[6] = 0;
    b[7] = 0;
    require_error([&] { parse(b); }, errc::format_error, "version 0.0");
  }
  {
    bytes_t b = good;
    b[8] = 0xFF;
    b[9] = 0xFF;
    require_error([&] { parse(b); }, errc::format_error, "header length 65535 (at offset 8) runs past the end of the file");
    bytes_t c = bgtq::detail::npy_bytes_version(v.data(), {2, 3}, npy_dtype::f32, 2);
    c[11] = 0x80;
    require_error([&] { parse(c); }, errc::format_error, "runs past the end");
    require_error([&] { parse(bytes_t(c.begin(), c.begin() + 11)); }, errc::format_error, "truncated");
  }
  // every truncation of a valid file fails cleanly
  for (int major : {1, 3}) {
    const bytes_t b = bgtq::detail::npy_bytes_version(v.data(), {2, 3}, npy_dtype::f16, major);
    for (std::size_t n = 0; n < b.size(); ++n) {
      INFO("major " << major << " truncated to " << n);
      bool threw = false;
      try {
        parse(bytes_t(b.begin(), b.begin() + static_cast<long>(n)));
      } catch (const bgtq::error& e) {
        threw = e.code() == errc::format_error;
      }
      REQUIRE(threw);
    }
  }
}

TEST_CASE("npy header dict errors name the problem and the offset", "[io][npy]") {
  struct bad_case {
    std::string dict;
    std::string needle;
  };
  const std::vector<bad_case> cases = {
      {"{'descr': '<f4', 'shape': (2, 3), }", "no 'fortran_order' key"},
      {"{'fortran_order': False, 'shape': (2, 3), }", "no 'descr' key"},
      {"{'descr': '<f4', 'fortran_order': False, }", "no 'shape' key"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'foo': 1, }", "unexpected key 'foo'"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", "duplicate key 'descr'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'shape': (6,), }", "duplicate key 'shape'"},
      {"{'descr': '<f4', 'fortran_order': False, 'fortran_order': False, 'shape': (2, 3), }", "duplicate key 'fortran_order'"},
      {"{\"descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", "unterminated string"},
      {"{'descr: '<f4', 'fortran_order': False, 'shape': (2, 3), }", "expected ':' after key"},
      {"{'descr': <f4, 'fortran_order': False, 'shape': (2, 3), }", "expected a quoted dtype string"},
      {"{'descr': '<\\x66\\x34', 'fortran_order': False, 'shape': (2, 3), }", "escape sequences"},
      {"{'descr': '<f4' 'fortran_order': False, 'shape': (2, 3), }", "expected ',' or '}'"},
      {"['descr', '<f4']", "must start with '{'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } junk", "unexpected text after the header dict"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), ", "but the header ends"},
      {dict_of(">f4", "(2, 3)"), "unsupported dtype '>f4'"},
      {dict_of("<f8", "(2, 3)"), "unsupported dtype '<f8'"},
      {dict_of("<i4", "(2, 3)"), "unsupported dtype '<i4'"},
      {dict_of("|f2", "(2, 3)"), "unsupported dtype '|f2'"},
      {dict_of("=f4", "(2, 3)"), "unsupported dtype '=f4'"},
      {dict_of("float32", "(2, 3)"), "unsupported dtype 'float32'"},
      {"{'descr': [('x', '<f4')], 'fortran_order': False, 'shape': (2, 3), }", "structured dtypes are not supported"},
      {dict_of("<f4", "(2, 3)", "True"), "Fortran-order arrays are not supported"},
      {dict_of("<f4", "(2, 3)", "Falsey"), "expected True or False"},
      {dict_of("<f4", "(2, 3)", "0"), "expected True or False"},
      {dict_of("<f4", "(-2, 3)"), "negative shape entry"},
      {dict_of("<f4", "(2.5, 3)"), "non-integer shape entry '2.'"},
      {dict_of("<f4", "(2, 3e2)"), "non-integer shape entry"},
      {dict_of("<f4", "(2, 0x3)"), "non-integer shape entry"},
      {dict_of("<f4", "(2, 03)"), "shape entry '03' has a leading zero"},
      {dict_of("<f4", "(064,)"), "shape entry '064' has a leading zero"},
      {dict_of("<f4", "(2, 'a')"), "expected a non-negative integer"},
      {dict_of("<f4", "(2 3)"), "expected ',' or ')'"},
      {dict_of("<f4", "(2,, 3)"), "expected a non-negative integer"},
      {dict_of("<f4", "(6)"), "shape (6) is not a tuple"},
      {dict_of("<f4", "[2, 3]"), "expected a tuple '('"},
      {dict_of("<f4", "(99999999999999999999999,)"), "shape entry overflows"},
      {dict_of("<f4", "(4294967296, 4294967296, 2)"), "more elements than fit"},
      {dict_of("<f4", "(4611686018427387904,)"), "needs more bytes than fit"},
  };
  for (const auto& c : cases) {
    INFO("dict: " << c.dict);
    const bytes_t b = raw_npy(c.dict, 24);
    require_error([&] { parse(b, "bad.npy"); }, errc::format_error, c.needle);
    require_error([&] { parse(b, "bad.npy"); }, errc::format_error, "bad.npy: ");
  }
  // offsets point into the header (10 bytes of magic, version and length, then the dict):
  // at the start of the offending key or value
  struct offset_case {
    std::string dict, token, message;
  };
  const std::vector<offset_case> at = {
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'foo': 1, }", "'foo'", "unexpected key 'foo'"},
      {dict_of(">f4", "(2, 3)"), "'>f4'", "unsupported dtype '>f4'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'shape': (6,), }", "'shape': (6", "duplicate key 'shape'"},
      {dict_of("<f4", "(2, -3)"), "-3", "negative shape entry"},
      {dict_of("<f4", "(2, 007)"), "007", "shape entry '007' has a leading zero"},
      {dict_of("<f4", "(6)"), "(6)", "shape (6) is not a tuple"},
  };
  for (const auto& c : at) {
    INFO("dict: " << c.dict);
    require_error([&] { parse(raw_npy(c.dict, 24)); }, errc::format_error,
                  "bad .npy header at offset " + std::to_string(10 + c.dict.find(c.token)) + ": " + c.message);
  }
  // the example of docs/formats.md, word for word
  require_error([&] { parse(raw_npy(dict_of(">f4", "(2, 3)"), 24), "k.npy"); }, errc::format_error,
                "k.npy: bad .npy header at offset 20: unsupported dtype '>f4' (expected '<f4' float32 or '<f2' float16, "
                "little-endian)");
  // rank limit
  std::string many = "(";
  for (int i = 0; i < 65; ++i) many += "1, ";
  require_error([&] { parse(raw_npy(dict_of("<f4", many + ")"), 4)); }, errc::format_error, "more than 64 dimensions");
}

TEST_CASE("npy accepts what the spec allows: other spacing, key order, quotes, 16-byte alignment", "[io][npy]") {
  const std::vector<std::string> dicts = {
      "{'shape': (2, 3), 'fortran_order': False, 'descr': '<f4'}",
      "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2,3)}",
      "{ 'descr' : '<f4' ,\t'fortran_order' : False , 'shape' : ( 2 , 3 , ) , }",
  };
  // "00" is Python's zero (literal_eval accepts it, unlike "03")
  CHECK(parse(raw_npy(dict_of("<f4", "(00, 3)"), 0)).shape == std::vector<std::size_t>{0, 3});
  for (const auto& d : dicts) {
    INFO(d);
    const bgtq::npy_array a = parse(raw_npy(d, 24));
    CHECK(a.shape == std::vector<std::size_t>{2, 3});
    CHECK(a.dtype == npy_dtype::f32);
  }
  // old NumPy aligned the data to 16 bytes only
  std::string s = std::string("\x93NUMPY\x01\x00", 8);
  std::string dict = dict_of("<f2", "(3,)");
  std::size_t total = dict.size() + 1;
  while ((10 + total) % 16) ++total;
  s += static_cast<char>(total & 0xFF);
  s += static_cast<char>(total >> 8);
  s += dict + std::string(total - dict.size() - 1, ' ') + "\n";
  s += std::string("\x00\x3c\x00\x40\x00\xc2", 6);  // 1, 2, -3
  const bgtq::npy_array a = parse(to_bytes(s));
  CHECK(a.data == std::vector<float>{1.f, 2.f, -3.f});
  // version 3.0 (UTF-8 header) and 2.0
  for (int major : {2, 3}) {
    const bgtq::npy_array b = parse(raw_npy(dict_of("<f4", "(0, 7)"), 0, major));
    CHECK(b.shape == std::vector<std::size_t>{0, 7});
    CHECK(b.data.empty());
  }
}

TEST_CASE("npy data size: short data and trailing bytes are rejected before allocating", "[io][npy]") {
  require_error([&] { parse(raw_npy(dict_of("<f4", "(2, 3)"), 20), "k.npy"); }, errc::format_error,
                "k.npy: data is shorter than the shape says: shape (2, 3) of <f4 needs 24 bytes from offset 128, the file has 20");
  require_error([&] { parse(raw_npy(dict_of("<f2", "(2, 3)"), 16)); }, errc::format_error,
                "4 trailing bytes after the array data (data ends at offset 140, the file is 144 bytes)");
  // a huge declared array in a tiny file fails on size, without trying to allocate 4 TB
  require_error([&] { parse(raw_npy(dict_of("<f4", "(1000000000, 1000)"), 8)); }, errc::format_error,
                "needs 4000000000000 bytes");
  // read_npy applies the same checks from the file size
  bgtq_test::temp_dir dir("npy_short");
  bgtq_test::write_bytes(dir.file("big.npy"), raw_npy(dict_of("<f2", "(100000, 100000)"), 64));
  require_error([&] { bgtq::read_npy(dir.file("big.npy")); }, errc::format_error, "needs 20000000000 bytes");
  bgtq_test::write_bytes(dir.file("trail.npy"), raw_npy(dict_of("<f4", "(1,)"), 5));
  require_error([&] { bgtq::read_npy(dir.file("trail.npy")); }, errc::format_error, "1 trailing bytes");
  bgtq_test::write_bytes(dir.file("hdr.npy"), to_bytes(std::string("\x93NUMPY\x01\x00\x00\x10{'descr'", 17)));
  require_error([&] { bgtq::read_npy(dir.file("hdr.npy")); }, errc::format_error, "runs past the end of the file");
  bgtq_test::write_bytes(dir.file("empty.npy"), {});
  require_error([&] { bgtq::read_npy(dir.file("empty.npy")); }, errc::format_error, "empty file");
}

TEST_CASE("read_npy reports unreadable paths as io_error naming the path", "[io][npy]") {
  bgtq_test::temp_dir dir("npy_io");
  require_error([&] { bgtq::read_npy(dir.file("missing.npy")); }, errc::io_error, "missing.npy");
  require_error([&] { bgtq::read_npy(dir.path.string()); }, errc::io_error, "is a directory");
}

TEST_CASE("read_npy reads a stream (a FIFO, as /dev/stdin or <(zcat f.gz) would be) whole, then parses it", "[io][npy]") {
  bgtq_test::temp_dir dir("npy_stream");
  const std::string fifo = dir.file("pipe");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // the writer thread feeds the FIFO (no Catch2 macros there); `bytes` of each case
  const auto through_fifo = [&](const std::vector<unsigned char>& bytes) {
    std::thread writer([&] {
      std::ofstream out(fifo, std::ios::binary);
      out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    });
    struct joiner {
      std::thread& t;
      ~joiner() { t.join(); }
    } join{writer};
    return bgtq::read_npy(fifo);
  };
  // 3 MiB of f16 (several of the stream's 1 MiB reads, the last one partial) and a small f32 array
  bgtq::counter_rng r(5);
  std::vector<float> big(3 * 1024 * 1024 / 2 + 77);
  for (float& x : big) x = bgtq::half_bits_to_float(bgtq::float_to_half_bits(static_cast<float>(r.normal())));
  for (const auto& [data, shape, dtype] : {std::tuple{big, std::vector<std::size_t>{big.size()}, npy_dtype::f16},
                                           std::tuple{std::vector<float>{1.5f, -2.0f, 0.25f, 8.0f, 0.0f, 3.0f},
                                                      std::vector<std::size_t>{2, 3}, npy_dtype::f32}}) {
    const bgtq::npy_array a = through_fifo(bgtq::npy_bytes(data.data(), shape, dtype));
    CHECK(a.shape == shape);
    CHECK(a.dtype == dtype);
    CHECK(a.data == data);
  }
  // the stream's errors are the file's: a truncated stream, an empty one
  std::vector<unsigned char> cut = bgtq::npy_bytes(big.data(), {big.size()}, npy_dtype::f16);
  cut.resize(cut.size() - 3);
  require_error([&] { through_fifo(cut); }, errc::format_error, "data is shorter than the shape says");
  require_error([&] { through_fifo({}); }, errc::format_error, "empty file (0 bytes)");
  // trailing bytes (a small array: the writer's one write() is in the pipe before the reader stops)
  std::vector<unsigned char> extra = bgtq::npy_bytes(big.data(), {7}, npy_dtype::f32);
  extra.insert(extra.end(), {1, 2, 3, 4, 5});
  require_error([&] { through_fifo(extra); }, errc::format_error, "trailing bytes after the array data");
  // a device that never ends fails on its first bytes (read in stages), not when memory runs out
  require_error([&] { bgtq::read_npy("/dev/zero"); }, errc::format_error, "bad magic at offset 0");
}

TEST_CASE("require_finite names the first bad element by multi-index and flat index", "[io][npy]") {
  bgtq::npy_array a;
  a.shape = {2, 13, 4, 8};
  a.data.assign(a.size(), 1.0f);
  CHECK_NOTHROW(bgtq::require_finite(a, "k.npy"));
  const std::size_t flat = ((0 * 13 + 12) * 4 + 3) * 8 + 7;
  a.data[flat] = std::numeric_limits<float>::quiet_NaN();
  a.data[flat + 5] = std::numeric_limits<float>::infinity();
  require_error([&] { bgtq::require_finite(a, "k.npy"); }, errc::non_finite, "k.npy: element [0, 12, 3, 7] (flat 415) is NaN");
  a.data[flat] = 0.f;
  require_error([&] { bgtq::require_finite(a, "k.npy"); }, errc::non_finite, "element [1, 0, 0, 4] (flat 420) is +Inf");
  a.data[flat + 5] = -std::numeric_limits<float>::infinity();
  require_error([&] { bgtq::require_finite(a, "k.npy"); }, errc::non_finite, "is -Inf");
  bgtq::npy_array s;
  s.data = {std::numeric_limits<float>::quiet_NaN()};
  require_error([&] { bgtq::require_finite(s, "s.npy"); }, errc::non_finite, "s.npy: element [] (flat 0) is NaN");
  // f16 overflow to Inf on write is caught on the way back in
  const float big = 1e6f;
  const bgtq::npy_array h = parse(bgtq::npy_bytes(&big, {1}, npy_dtype::f16));
  require_error([&] { bgtq::require_finite(h, "h.npy"); }, errc::non_finite, "element [0] (flat 0) is +Inf");
}

TEST_CASE("npy parser survives random corruption (mini fuzz)", "[io][npy]") {
  const std::vector<float> v = random_values(3, 12);
  std::vector<bytes_t> seeds;
  for (int major : {1, 2, 3})
    for (npy_dtype dt : {npy_dtype::f32, npy_dtype::f16})
      seeds.push_back(bgtq::detail::npy_bytes_version(v.data(), {3, 4}, dt, major));
  bgtq::counter_rng r(11);
  int ok = 0, rejected = 0;
  for (int it = 0; it < 6000; ++it) {
    bytes_t b = seeds[r.below(static_cast<std::uint32_t>(seeds.size()))];
    const int edits = 1 + static_cast<int>(r.below(4));
    for (int e = 0; e < edits; ++e) {
      const std::uint32_t kind = r.below(4);
      if (b.empty()) break;
      const std::size_t at = r.below(static_cast<std::uint32_t>(b.size()));
      if (kind == 0) b[at] = static_cast<unsigned char>(r.next_u32());
      else if (kind == 1) b[at] = "{}(),:' \n0123456789TFeLx-"[r.below(25)];
      else if (kind == 2) b.resize(at);
      else b.insert(b.begin() + static_cast<long>(at), static_cast<unsigned char>(r.next_u32()));
    }
    try {
      const bgtq::npy_array a = parse(b);
      REQUIRE(a.data.size() == a.size());
      ++ok;
    } catch (const bgtq::error& e) {
      REQUIRE((e.code() == errc::format_error));
      ++rejected;
    }
  }
  CHECK(ok > 0);
  CHECK(rejected > 0);
}

TEST_CASE("real Llama-2 layer 9 keys load as f16 [66, 32, 128], finite, with NumPy's exact header", "[io][npy][data]") {
  const std::string path = bgtq_test::require_data("llama2_7b_layer9/k.npy");
  const bgtq::npy_array k = bgtq::read_npy(path);
  CHECK(k.dtype == npy_dtype::f16);
  CHECK(k.shape == std::vector<std::size_t>{66, 32, 128});
  REQUIRE(k.data.size() == 66u * 32u * 128u);
  CHECK_NOTHROW(bgtq::require_finite(k, path));
  double energy = 0;
  for (float x : k.data) energy += static_cast<double>(x) * x;
  CHECK(energy > 0);
  const bytes_t file = bgtq_test::read_bytes(path);
  const bytes_t header = bgtq::detail::npy_header_bytes(k.shape, npy_dtype::f16);
  REQUIRE(header.size() == 128);
  CHECK(bytes_t(file.begin(), file.begin() + 128) == header);  // written by NumPy
  // and our writer reproduces the whole file exactly (f16 -> f32 -> f16 is exact)
  CHECK(bgtq::npy_bytes(k.data.data(), k.shape, npy_dtype::f16) == file);
}

TEST_CASE("npy fuzz seed corpus is current and parses", "[io][npy][corpus]") {
  const std::vector<float> v = {0.f, 1.f, -2.5f, 3.25f, 1e-3f, -65504.f, 7.f, 0.5f, -0.f, 100.f, 2e-5f, 42.f};
  struct seed {
    const char* file;
    std::vector<std::size_t> shape;
    npy_dtype dt;
    int major;
  };
  const std::vector<seed> seeds = {
      {"v1_f32_2x3.npy", {2, 3}, npy_dtype::f32, 1},     {"v1_f16_5.npy", {5}, npy_dtype::f16, 1},
      {"v1_f32_scalar.npy", {}, npy_dtype::f32, 1},      {"v1_f16_0x4.npy", {0, 4}, npy_dtype::f16, 1},
      {"v2_f32_2x2x3.npy", {2, 2, 3}, npy_dtype::f32, 2}, {"v2_f16_3x1x2.npy", {3, 1, 2}, npy_dtype::f16, 2},
      {"v3_f32_1x2x2x3.npy", {1, 2, 2, 3}, npy_dtype::f32, 3}, {"v3_f16_12.npy", {12}, npy_dtype::f16, 3},
  };
  for (const auto& s : seeds) {
    const bytes_t b = bgtq::detail::npy_bytes_version(v.data(), s.shape, s.dt, s.major);
    CHECK(b.size() < 4096);
    CHECK(parse(b).shape == s.shape);
    bgtq_test::check_or_write_corpus("npy", s.file, b);
  }
}

// The checks of an artifact's CPU code before it is loaded (runtime/ElfImage.h): the kernel
// library as codegen links it passes and loads; each structure the loader trusts, damaged on
// its own, is refused with a message naming it; and random damage inside an artifact whose
// checksums were recomputed is refused or loads, never a crash.
#include "ArtifactEdit.h"
#include "RuntimeTestUtil.h"

#include "runtime/Artifact.h"
#include "runtime/CpuObject.h"
#include "runtime/ElfImage.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <elf.h>
#include <fstream>
#include <functional>
#include <iterator>

namespace smelt::rt::test {
namespace {

using Bytes = std::vector<uint8_t>;

#if defined(__x86_64__)
constexpr uint32_t kIrelative = R_X86_64_IRELATIVE, kGlobDat = R_X86_64_GLOB_DAT;
#else
constexpr uint32_t kIrelative = R_AARCH64_IRELATIVE, kGlobDat = R_AARCH64_GLOB_DAT;
#endif

Bytes readLibrary(const char *path) {
  std::ifstream in(path, std::ios::binary);
  Bytes bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_FALSE(bytes.empty()) << "cannot read " << path;
  return bytes;
}

/// The test kernels linked as codegen links kernel libraries.
Bytes kernels() { return readLibrary(SMELT_TEST_KERNELS_PATH); }

template <typename T> T get(const Bytes &b, uint64_t at) {
  T v;
  std::memcpy(&v, b.data() + at, sizeof v);
  return v;
}
template <typename T> void put(Bytes &b, uint64_t at, const T &v) {
  std::memcpy(b.data() + at, &v, sizeof v);
}

/// Where things are in an intact image, found the way a reader of the format finds them (not
/// through ElfImage.cpp): program headers by index, tables by address through PT_LOAD.
struct Layout {
  const Bytes &b;
  Elf64_Ehdr header() const { return get<Elf64_Ehdr>(b, 0); }
  uint64_t phdrAt(int i) const { return header().e_phoff + uint64_t(i) * sizeof(Elf64_Phdr); }
  Elf64_Phdr phdr(int i) const { return get<Elf64_Phdr>(b, phdrAt(i)); }
  /// The first program header of `type`.
  int find(uint32_t type) const {
    for (int i = 0; i < header().e_phnum; ++i)
      if (phdr(i).p_type == type)
        return i;
    ADD_FAILURE() << "no program header of type " << type;
    return 0;
  }
  int findLoad(uint32_t flags) const {
    for (int i = 0; i < header().e_phnum; ++i)
      if (phdr(i).p_type == PT_LOAD && (phdr(i).p_flags & flags) == flags)
        return i;
    ADD_FAILURE() << "no loaded segment with flags " << flags;
    return 0;
  }
  uint64_t offsetOf(uint64_t vaddr) const {
    for (int i = 0; i < header().e_phnum; ++i) {
      Elf64_Phdr p = phdr(i);
      if (p.p_type == PT_LOAD && vaddr >= p.p_vaddr && vaddr < p.p_vaddr + p.p_filesz)
        return p.p_offset + (vaddr - p.p_vaddr);
    }
    ADD_FAILURE() << "address " << vaddr << " is in no loaded segment";
    return 0;
  }
  /// The byte of the first dynamic entry with `tag`.
  uint64_t dynamicAt(int64_t tag) const {
    Elf64_Phdr d = phdr(find(PT_DYNAMIC));
    for (uint64_t at = d.p_offset; at < d.p_offset + d.p_filesz; at += sizeof(Elf64_Dyn))
      if (get<Elf64_Dyn>(b, at).d_tag == tag)
        return at;
    ADD_FAILURE() << "no dynamic entry with tag " << tag;
    return 0;
  }
  uint64_t dynamicValue(int64_t tag) const { return get<Elf64_Dyn>(b, dynamicAt(tag)).d_un.d_val; }
  uint64_t tableAt(int64_t tag) const { return offsetOf(dynamicValue(tag)); }
  /// The byte of dynamic symbol `name`.
  uint64_t symbolAt(const char *name) const {
    uint64_t symtab = tableAt(DT_SYMTAB), strtab = tableAt(DT_STRTAB);
    for (uint64_t at = symtab + sizeof(Elf64_Sym); at < strtab; at += sizeof(Elf64_Sym))
      if (std::strcmp(reinterpret_cast<const char *>(b.data() + strtab +
                                                     get<Elf64_Sym>(b, at).st_name),
                      name) == 0)
        return at;
    ADD_FAILURE() << "no symbol " << name;
    return 0;
  }
};

/// checkElfImage's message for `image`, "" when it passes.
std::string checkError(const Bytes &image) {
  Status s = checkElfImage(image);
  return s.ok() ? "" : s.message();
}

/// `edit` applied to the kernel library must be refused with `part` in the message, and the
/// loader must refuse it too, before dlopen sees it.
void expectRefused(const std::function<void(Bytes &, const Layout &)> &edit,
                   const std::string &part) {
  Bytes image = kernels();
  Bytes original = image;
  edit(image, Layout{original});
  ASSERT_NE(image, original) << "the edit changed nothing";
  std::string message = checkError(image);
  EXPECT_NE(message.find("the CPU code's ELF image, byte "), std::string::npos) << message;
  EXPECT_NE(message.find(part), std::string::npos) << "expected '" << part << "' in: " << message;
  Expected<std::shared_ptr<const CpuCode>> loaded = loadCpuObject(image, {"smelt_test_square"});
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.message().find(part), std::string::npos) << loaded.message();
}

/// Sets the tag (and keeps the value) of the first dynamic entry with tag `from`.
void retag(Bytes &b, const Layout &l, int64_t from, int64_t to) {
  put<int64_t>(b, l.dynamicAt(from) + offsetof(Elf64_Dyn, d_tag), to);
}

TEST(ElfImage, AcceptsTheKernelLibraryAndItLoadsAndRuns) {
  Bytes image = kernels();
  EXPECT_EQ(checkError(image), "");
  // What a real kernel library may have is here too: a needed libm, symbol versions,
  // relocations against libm and a relative one.
  Layout l{image};
  EXPECT_NE(l.dynamicAt(DT_NEEDED), 0u);
  EXPECT_NE(l.dynamicAt(DT_VERNEED), 0u);
  Expected<std::shared_ptr<const CpuCode>> code =
      loadCpuObject(image, {"smelt_test_square", "smelt_test_unary"});
  ASSERT_TRUE(code.ok()) << code.message();
  float x[2] = {0.5f, -1.25f}, y[2] = {};
  void *args[2] = {x, y};
  (*code)->entries[1](args, 0, 2); // expf through the relocated table
  EXPECT_FLOAT_EQ(y[0], std::exp(0.5f));
  EXPECT_FLOAT_EQ(y[1], std::exp(-1.25f));
}

TEST(ElfImage, RefusesALibraryWithConstructors) {
  // The same kernels linked with the C runtime's startup files, as `c++ -shared` does by
  // default: loading it would run their code (and any code a damaged file puts there).
  std::string message = checkError(readLibrary(SMELT_TEST_KERNELS_CRT_PATH));
  EXPECT_NE(message.find("asks for constructors or destructors"), std::string::npos) << message;
}

TEST(ElfImage, RefusesDamagedHeaders) {
  expectRefused([](Bytes &b, const Layout &) { b[1] = 'X'; }, "not an ELF image");
  expectRefused([](Bytes &b, const Layout &) { b[EI_CLASS] = ELFCLASS32; }, "class 1");
  expectRefused([](Bytes &b, const Layout &) { put<uint16_t>(b, 18, EM_RISCV); }, "machine 243");
  expectRefused([](Bytes &b, const Layout &) { put<uint16_t>(b, 16, ET_EXEC); },
                "not a shared library");
  expectRefused([](Bytes &b, const Layout &l) { put<uint64_t>(b, 32, b.size() - 8); },
                "program headers at byte");
  expectRefused([](Bytes &b, const Layout &) { put<uint16_t>(b, 56, 0xffff); },
                "65535 program headers");
  expectRefused([](Bytes &b, const Layout &) { put<uint64_t>(b, 40, b.size() - 64); },
                "section headers");
}

TEST(ElfImage, RefusesDamagedSegments) {
  auto phdrField = [](int (*pick)(const Layout &), size_t field, uint64_t value, int bytes) {
    return [=](Bytes &b, const Layout &l) {
      uint64_t at = l.phdrAt(pick(l)) + field;
      if (bytes == 4)
        put<uint32_t>(b, at, uint32_t(value));
      else
        put<uint64_t>(b, at, value);
    };
  };
  auto text = [](const Layout &l) { return l.findLoad(PF_X); };
  auto data = [](const Layout &l) { return l.findLoad(PF_W); };
  auto dynamic = [](const Layout &l) { return l.find(PT_DYNAMIC); };
  auto stack = [](const Layout &l) { return l.find(PT_GNU_STACK); };
  // File bytes past the end: the loader would map pages that do not exist (SIGBUS on use).
  expectRefused(phdrField(text, offsetof(Elf64_Phdr, p_filesz), 1 << 20, 8), "ends past");
  expectRefused(phdrField(text, offsetof(Elf64_Phdr, p_offset), uint64_t(1) << 40, 8),
                "ends past");
  expectRefused(phdrField(text, offsetof(Elf64_Phdr, p_flags), PF_R | PF_W | PF_X, 4),
                "both writable and executable");
  expectRefused(phdrField(text, offsetof(Elf64_Phdr, p_memsz), uint64_t(1) << 50, 8),
                "is not well-formed");
  expectRefused(phdrField(text, offsetof(Elf64_Phdr, p_align), 3 << 12, 8), "alignment");
  expectRefused([&](Bytes &b, const Layout &l) {
    // Two pages down, so alignment still holds but the segment sits below the one before it.
    uint64_t at = l.phdrAt(data(l)) + offsetof(Elf64_Phdr, p_vaddr);
    put<uint64_t>(b, at, get<uint64_t>(b, at) - 2 * 4096);
  }, "overlaps or precedes");
  expectRefused(phdrField(dynamic, offsetof(Elf64_Phdr, p_vaddr), 0x7fff0000, 8),
                "the dynamic segment");
  expectRefused(phdrField(stack, offsetof(Elf64_Phdr, p_flags), PF_R | PF_W | PF_X, 4),
                "executable stack");
  expectRefused(phdrField(stack, offsetof(Elf64_Phdr, p_type), PT_INTERP, 4),
                "an interpreter segment");
  expectRefused(phdrField(stack, offsetof(Elf64_Phdr, p_type), PT_TLS, 4), "thread-local");
}

TEST(ElfImage, RefusesDynamicEntriesThatLoadCodeOrLookElsewhere) {
  auto retagSoname = [](int64_t to) {
    return [to](Bytes &b, const Layout &l) { retag(b, l, DT_SONAME, to); };
  };
  expectRefused(retagSoname(DT_INIT_ARRAY), "asks for constructors or destructors");
  expectRefused(retagSoname(DT_INIT), "asks for constructors or destructors");
  expectRefused(retagSoname(DT_RUNPATH), "a library search path");
  expectRefused(retagSoname(DT_TEXTREL), "relocations of read-only code");
  expectRefused(retagSoname(DT_FILTER), "filter, audit or configuration libraries");
  expectRefused(retagSoname(0x6000000f), "dynamic tag 0x6000000f is not one a kernel library has");
  expectRefused(retagSoname(DT_STRTAB), "appears twice");
  // A needed library that is not the C library: its constructors would run.
  expectRefused(retagSoname(DT_NEEDED), "needs 'libartifact-test-kernels.so'");
  expectRefused([](Bytes &b, const Layout &l) {
    uint64_t strsz = l.dynamicAt(DT_STRSZ) + offsetof(Elf64_Dyn, d_un);
    put<uint64_t>(b, strsz, uint64_t(1) << 32);
  }, "the string table (4294967296 bytes");
  // No DT_NULL: the loader reads entries until it finds one.
  expectRefused([](Bytes &b, const Layout &l) {
    Elf64_Phdr d = l.phdr(l.find(PT_DYNAMIC));
    for (uint64_t at = d.p_offset; at < d.p_offset + d.p_filesz; at += sizeof(Elf64_Dyn))
      if (get<int64_t>(b, at) == DT_NULL)
        put<Elf64_Dyn>(b, at, Elf64_Dyn{DT_NEEDED, {l.dynamicValue(DT_NEEDED)}});
  }, "no DT_NULL end");
}

TEST(ElfImage, RefusesHashTablesThatSendLookupsOutside) {
  auto gnuHash = [](uint64_t field, uint32_t value) {
    return [=](Bytes &b, const Layout &l) { put<uint32_t>(b, l.tableAt(DT_GNU_HASH) + field, value); };
  };
  expectRefused(gnuHash(0, 0), "has 0 buckets"); // a lookup divides by the bucket count
  expectRefused(gnuHash(8, 3), "3 bloom words");
  expectRefused([](Bytes &b, const Layout &l) {
    uint64_t at = l.tableAt(DT_GNU_HASH);
    uint32_t bloom = get<uint32_t>(b, at + 8);
    put<uint32_t>(b, at + 16 + 8 * uint64_t(bloom), 100000); // bucket 0 past every chain
  }, "does not end inside the table");
  expectRefused([](Bytes &b, const Layout &l) {
    // Chains without their end bits: a lookup would walk past the table.
    uint64_t at = l.tableAt(DT_GNU_HASH);
    uint32_t buckets = get<uint32_t>(b, at), bloom = get<uint32_t>(b, at + 8);
    uint64_t chains = at + 16 + 8 * uint64_t(bloom) + 4 * uint64_t(buckets);
    for (uint64_t c = chains; c < l.tableAt(DT_SYMTAB) && c + 4 <= b.size(); c += 4)
      if (get<uint32_t>(b, c) & 1)
        put<uint32_t>(b, c, get<uint32_t>(b, c) & ~1u);
    Elf64_Phdr first = l.phdr(0);
    for (uint64_t c = chains; c + 4 <= first.p_offset + first.p_filesz; c += 4)
      put<uint32_t>(b, c, get<uint32_t>(b, c) & ~1u);
  }, "does not end inside the table");
}

TEST(ElfImage, RefusesSymbolsOutsideTheirSegmentsAndLoaderRunCode) {
  auto symbolField = [](size_t field, auto value) {
    return [=](Bytes &b, const Layout &l) { put(b, l.symbolAt("smelt_test_square") + field, value); };
  };
  expectRefused(symbolField(offsetof(Elf64_Sym, st_value), uint64_t(0x7fff0000)),
                "is not inside an executable segment");
  expectRefused(symbolField(offsetof(Elf64_Sym, st_name), uint32_t(1) << 30),
                "name is outside the string table");
  expectRefused(symbolField(offsetof(Elf64_Sym, st_info),
                            uint8_t(ELF64_ST_INFO(STB_GLOBAL, STT_GNU_IFUNC))),
                "an IFUNC");
  expectRefused(symbolField(offsetof(Elf64_Sym, st_info), uint8_t(ELF64_ST_INFO(STB_GLOBAL, STT_TLS))),
                "thread-local");
}

TEST(ElfImage, RefusesRelocationsAndVersionsThatWriteOrReadOutside) {
  // The first relocation of the library (the table's relative one, or a GOT slot).
  auto firstRelocation = [](const Layout &l) {
    return l.tableAt(l.dynamicAt(DT_RELA) ? DT_RELA : DT_JMPREL);
  };
  expectRefused([&](Bytes &b, const Layout &l) {
    // Into the code, which is not writable: the loader would fault writing it.
    put<uint64_t>(b, firstRelocation(l) + offsetof(Elf64_Rela, r_offset),
                  l.phdr(l.findLoad(PF_X)).p_vaddr);
  }, "outside the writable segments");
  expectRefused([&](Bytes &b, const Layout &l) {
    uint64_t info = get<uint64_t>(b, firstRelocation(l) + offsetof(Elf64_Rela, r_info));
    put<uint64_t>(b, firstRelocation(l) + offsetof(Elf64_Rela, r_info),
                  ELF64_R_INFO(ELF64_R_SYM(info), kIrelative));
  }, fmt::format("relocation type {}", kIrelative));
  expectRefused([&](Bytes &b, const Layout &l) {
    put<uint64_t>(b, firstRelocation(l) + offsetof(Elf64_Rela, r_info),
                  ELF64_R_INFO(9999, kGlobDat));
  }, "names symbol #9999");
  expectRefused([](Bytes &b, const Layout &l) {
    // A version index past those the needs define: the loader indexes its array with it.
    put<uint16_t>(b, l.tableAt(DT_VERSYM) + 2, 77);
  }, "version index 77");
  expectRefused([](Bytes &b, const Layout &l) {
    // A need for a file that is not needed: glibc asserts on it.
    uint64_t need = l.tableAt(DT_VERNEED);
    put<uint32_t>(b, need + offsetof(Elf64_Verneed, vn_file),
                  uint32_t(l.dynamicValue(DT_SONAME)));
  }, "for a library not needed");
}

TEST(ElfImage, RandomDamageInAResealedArtifactIsRefusedOrLoads) {
  // The reproducer of the issue: an artifact whose CPU code was altered and its checksums
  // recomputed crashed the loader (SIGSEGV, SIGBUS, SIGILL) in 7 of 200 cases. Each damaged
  // library here is refused or loads without running any of its code; a crash fails the test.
  Bytes library = kernels();
  {
    // Without NODELETE (LLVM's flags link every shared library with it), so the libraries that
    // load are unloaded again instead of piling up.
    Layout l{library};
    put<uint64_t>(library, l.dynamicAt(DT_FLAGS_1) + offsetof(Elf64_Dyn, d_un), 0);
  }
  Executable exe;
  exe.name = "elf";
  ArtifactExtras extras{library, {}, "cpu", "ElfImageTest"};
  Expected<Bytes> artifact = encodeArtifact(exe, extras);
  ASSERT_TRUE(artifact.ok()) << artifact.message();
  std::unique_ptr<aot::PlanT> plan = planOf(*artifact);
  ASSERT_TRUE(plan->cpu && plan->cpu->library);
  size_t libraryAt = partsOf(*artifact)->dataAt + plan->cpu->library->offset();
  constexpr int kTrials = 2000;
  int refused = 0, loaded = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    Bytes damaged = *artifact;
    // Headers and dynamic tables (the first page) most of the time, anywhere else sometimes.
    size_t span = (rng()() % 4 == 0) ? library.size() : std::min<size_t>(library.size(), 4096);
    for (int edits = 1 + int(rng()() % 4); edits > 0; --edits) {
      size_t at = libraryAt + rng()() % span;
      damaged[at] = (rng()() & 1) ? uint8_t(rng()()) : uint8_t(damaged[at] ^ (1u << (rng()() % 8)));
    }
    reseal(damaged);
    Expected<LoadedArtifact> read = decodeArtifact(damaged, "damaged.smelt");
    ASSERT_TRUE(read.ok()) << read.message();
    Expected<std::shared_ptr<const CpuCode>> code =
        loadCpuObject(read->extras.cpuObject, {"smelt_test_square"});
    if (code.ok()) {
      ++loaded;
    } else {
      ++refused;
      // Refused by the checks or by the loader, or loaded without the symbol.
      ASSERT_TRUE(code.message().find("cannot load the CPU code") != std::string::npos ||
                  code.message().find("has no symbol 'smelt_test_square'") != std::string::npos)
          << code.message();
    }
  }
  std::printf("damaged CPU code: %d of %d refused, %d loaded\n", refused, kTrials, loaded);
  EXPECT_GT(refused, 0);
}

} // namespace
} // namespace smelt::rt::test

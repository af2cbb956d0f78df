// The ELF checks of an artifact's CPU code (ElfImage.h). They follow what glibc's loader reads
// when it maps and relocates a library (dl-load.c, dl-reloc.c, dl-version.c, dl-lookup.c): the
// loader reads the dynamic tables through the mapped memory, so every table is found by its
// address through the PT_LOAD segments, exactly as the loader will find it, and must lie in
// file-backed bytes of one segment.
#include "runtime/ElfImage.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <elf.h>
#include <map>
#include <optional>
#include <string_view>

namespace smelt::rt {

namespace {

#if defined(__x86_64__)
constexpr uint16_t kMachine = EM_X86_64;
constexpr const char *kMachineName = "x86-64 (EM_X86_64)";
constexpr uint32_t kRelative = R_X86_64_RELATIVE;
/// Relocations that store an address and nothing else: absolute, relative, GOT and PLT slots.
bool plainRelocation(uint32_t type) {
  return type == R_X86_64_NONE || type == R_X86_64_64 || type == R_X86_64_GLOB_DAT ||
         type == R_X86_64_JUMP_SLOT || type == R_X86_64_RELATIVE;
}
#elif defined(__aarch64__)
constexpr uint16_t kMachine = EM_AARCH64;
constexpr const char *kMachineName = "AArch64 (EM_AARCH64)";
constexpr uint32_t kRelative = R_AARCH64_RELATIVE;
bool plainRelocation(uint32_t type) {
  return type == R_AARCH64_NONE || type == R_AARCH64_ABS64 || type == R_AARCH64_GLOB_DAT ||
         type == R_AARCH64_JUMP_SLOT || type == R_AARCH64_RELATIVE;
}
#else
#error "the CPU code checks know x86-64 and AArch64 only"
#endif

constexpr uint64_t kPage = 4096;
/// Far beyond any kernel library (tens of KB to a few MB), far below what would exhaust the
/// address space: a damaged memory size is refused before the loader reserves it.
constexpr uint64_t kMaxSpan = uint64_t(1) << 30;
constexpr uint16_t kMaxProgramHeaders = 64;
/// Libraries a kernel library may need: kernels call the C math library and nothing else.
constexpr std::string_view kAllowedNeeded[] = {"libc.so.6", "libm.so.6", "libmvec.so.1"};

struct Segment {
  uint64_t vaddr, memsz, offset, filesz;
  uint32_t flags;
};

class ElfChecker {
public:
  explicit ElfChecker(const std::vector<uint8_t> &image) : bytes_(image) {}

  Status run() {
    for (auto check : {&ElfChecker::header, &ElfChecker::sections, &ElfChecker::segments,
                       &ElfChecker::dynamicEntries, &ElfChecker::strings,
                       &ElfChecker::symbolCount, &ElfChecker::symbols, &ElfChecker::versions,
                       &ElfChecker::relocations, &ElfChecker::needed})
      SMELT_RETURN_IF_ERROR((this->*check)());
    return Status();
  }

private:
  Status fail(uint64_t at, const std::string &what) const {
    return Status::error(fmt::format("the CPU code's ELF image, byte {}: {}", at, what));
  }
  bool inFile(uint64_t offset, uint64_t size) const {
    return offset <= bytes_.size() && size <= bytes_.size() - offset;
  }
  /// A value at a file offset the caller checked with inFile.
  template <typename T> T load(uint64_t offset) const {
    T value;
    std::memcpy(&value, bytes_.data() + offset, sizeof value);
    return value;
  }
  /// The PT_LOAD segment whose file-backed bytes hold memory [vaddr, vaddr + size).
  const Segment *fileSegment(uint64_t vaddr, uint64_t size) const {
    for (const Segment &s : loads_)
      if (vaddr >= s.vaddr && vaddr - s.vaddr <= s.filesz && size <= s.filesz - (vaddr - s.vaddr))
        return &s;
    return nullptr;
  }
  /// The file offset of memory [vaddr, vaddr + size) when it lies inside the file-backed bytes
  /// of one PT_LOAD segment: where the loader will read it from.
  std::optional<uint64_t> fileOffset(uint64_t vaddr, uint64_t size) const {
    if (const Segment *s = fileSegment(vaddr, size))
      return s->offset + (vaddr - s->vaddr);
    return std::nullopt;
  }
  /// How many file-backed bytes of its segment follow `vaddr` (0 outside every segment).
  uint64_t fileBytesFrom(uint64_t vaddr) const {
    for (const Segment &s : loads_)
      if (vaddr >= s.vaddr && vaddr - s.vaddr <= s.filesz)
        return s.filesz - (vaddr - s.vaddr);
    return 0;
  }
  /// The segment whose memory holds [vaddr, vaddr + size).
  const Segment *segmentHolding(uint64_t vaddr, uint64_t size) const {
    for (const Segment &s : loads_)
      if (vaddr >= s.vaddr && vaddr - s.vaddr <= s.memsz && size <= s.memsz - (vaddr - s.vaddr))
        return &s;
    return nullptr;
  }
  /// fileOffset for a table a dynamic entry points at, or an error naming it. The table must
  /// not be writable: relocations write there, and the loader reads the tables while it
  /// relocates.
  std::optional<uint64_t> table(uint64_t vaddr, uint64_t size, const char *what, Status &error) {
    const Segment *s = fileSegment(vaddr, size);
    if (!s || (s->flags & PF_W)) {
      error = fail(dynamicAt_, fmt::format("the {} ({} bytes at address {:#x}) is not inside the "
                                           "file bytes of a read-only loaded segment",
                                           what, size, vaddr));
      return std::nullopt;
    }
    return s->offset + (vaddr - s->vaddr);
  }
  bool hasTag(int64_t tag) const { return tags_.count(tag) != 0; }
  uint64_t tag(int64_t t) const { return tags_.at(t); }
  std::optional<std::string_view> string(uint64_t offset) const {
    if (offset >= strSize_)
      return std::nullopt;
    return std::string_view(reinterpret_cast<const char *>(bytes_.data() + strAt_ + offset));
  }

  Status header() {
    if (bytes_.size() < sizeof(Elf64_Ehdr))
      return fail(0, fmt::format("{} bytes are too few for an ELF header ({})", bytes_.size(),
                                 sizeof(Elf64_Ehdr)));
    auto h = load<Elf64_Ehdr>(0);
    if (std::memcmp(h.e_ident, ELFMAG, SELFMAG) != 0)
      return fail(0, "not an ELF image (no \\x7fELF magic)");
    if (h.e_ident[EI_CLASS] != ELFCLASS64 || h.e_ident[EI_DATA] != ELFDATA2LSB ||
        h.e_ident[EI_VERSION] != EV_CURRENT)
      return fail(EI_CLASS, fmt::format("class {}, data {}, version {}: this machine loads "
                                        "64-bit little-endian ELF version 1",
                                        h.e_ident[EI_CLASS], h.e_ident[EI_DATA],
                                        h.e_ident[EI_VERSION]));
    if (h.e_ident[EI_OSABI] != ELFOSABI_SYSV && h.e_ident[EI_OSABI] != ELFOSABI_GNU)
      return fail(EI_OSABI, fmt::format("OS ABI {} is not System V or GNU", h.e_ident[EI_OSABI]));
    if (h.e_type != ET_DYN)
      return fail(offsetof(Elf64_Ehdr, e_type),
                  fmt::format("type {} is not a shared library (ET_DYN)", h.e_type));
    if (h.e_machine != kMachine)
      return fail(offsetof(Elf64_Ehdr, e_machine),
                  fmt::format("machine {} is not this machine's, {}", h.e_machine, kMachineName));
    if (h.e_version != EV_CURRENT || h.e_ehsize != sizeof(Elf64_Ehdr) ||
        h.e_phentsize != sizeof(Elf64_Phdr))
      return fail(offsetof(Elf64_Ehdr, e_version),
                  fmt::format("version {}, header size {}, program header size {}: expected 1, "
                              "{} and {}",
                              h.e_version, h.e_ehsize, h.e_phentsize, sizeof(Elf64_Ehdr),
                              sizeof(Elf64_Phdr)));
    if (h.e_phnum == 0 || h.e_phnum > kMaxProgramHeaders || h.e_phoff % 8 != 0 ||
        !inFile(h.e_phoff, uint64_t(h.e_phnum) * sizeof(Elf64_Phdr)))
      return fail(offsetof(Elf64_Ehdr, e_phoff),
                  fmt::format("{} program headers at byte {} are not an aligned table of 1 to "
                              "{} entries inside the {} bytes",
                              h.e_phnum, h.e_phoff, kMaxProgramHeaders, bytes_.size()));
    header_ = h;
    return Status();
  }

  /// Section headers: the loader ignores them, but tools (debuggers, profilers) read them.
  Status sections() {
    const Elf64_Ehdr &h = header_;
    if (h.e_shnum == 0)
      return h.e_shoff == 0 ? Status()
                            : fail(offsetof(Elf64_Ehdr, e_shoff),
                                   "no section headers counted but a section table offset "
                                   "given (the extended numbering a kernel library never needs)");
    if (h.e_shentsize != sizeof(Elf64_Shdr) || h.e_shoff % 8 != 0 ||
        !inFile(h.e_shoff, uint64_t(h.e_shnum) * sizeof(Elf64_Shdr)) || h.e_shstrndx >= h.e_shnum)
      return fail(offsetof(Elf64_Ehdr, e_shoff),
                  fmt::format("{} section headers of {} bytes at byte {} (names in #{}) are not "
                              "a table inside the {} bytes",
                              h.e_shnum, h.e_shentsize, h.e_shoff, h.e_shstrndx, bytes_.size()));
    auto names = load<Elf64_Shdr>(h.e_shoff + uint64_t(h.e_shstrndx) * sizeof(Elf64_Shdr));
    for (uint16_t i = 0; i < h.e_shnum; ++i) {
      uint64_t at = h.e_shoff + uint64_t(i) * sizeof(Elf64_Shdr);
      auto s = load<Elf64_Shdr>(at);
      if (s.sh_type != SHT_NOBITS && s.sh_type != SHT_NULL && !inFile(s.sh_offset, s.sh_size))
        return fail(at, fmt::format("section #{} ({} bytes at byte {}) ends past the {} bytes",
                                    i, s.sh_size, s.sh_offset, bytes_.size()));
      if (s.sh_link >= h.e_shnum || (i != 0 && s.sh_name >= names.sh_size))
        return fail(at, fmt::format("section #{} links section #{} or names string {}, outside "
                                    "the {} sections and {} bytes of names",
                                    i, s.sh_link, s.sh_name, h.e_shnum, names.sh_size));
    }
    return Status();
  }

  Status segments() {
    std::optional<Elf64_Phdr> dynamic;
    std::vector<std::pair<uint64_t, Elf64_Phdr>> inLoaded; // checked once loads_ is complete
    for (uint16_t i = 0; i < header_.e_phnum; ++i) {
      uint64_t at = header_.e_phoff + uint64_t(i) * sizeof(Elf64_Phdr);
      auto p = load<Elf64_Phdr>(at);
      if (p.p_type != PT_NULL && !inFile(p.p_offset, p.p_filesz))
        return fail(at, fmt::format("segment #{} ({} file bytes at byte {}) ends past the {} "
                                    "bytes; the loader would map pages that do not exist",
                                    i, p.p_filesz, p.p_offset, bytes_.size()));
      switch (p.p_type) {
      case PT_NULL:
        break;
      case PT_LOAD: {
        bool alignOk = p.p_align >= kPage && (p.p_align & (p.p_align - 1)) == 0 &&
                       (p.p_vaddr - p.p_offset) % p.p_align == 0;
        if (p.p_filesz > p.p_memsz || p.p_memsz > kMaxSpan || p.p_vaddr > kMaxSpan || !alignOk)
          return fail(at, fmt::format("loaded segment #{} ({} file bytes at byte {}, {} bytes of "
                                      "memory at address {:#x}, alignment {:#x}) is not "
                                      "well-formed",
                                      i, p.p_filesz, p.p_offset, p.p_memsz, p.p_vaddr,
                                      p.p_align));
        if ((p.p_flags & PF_W) && (p.p_flags & PF_X))
          return fail(at, fmt::format("loaded segment #{} is both writable and executable", i));
        // The loader reads its tables, and the program headers, through the mapping.
        if (!(p.p_flags & PF_R))
          return fail(at, fmt::format("loaded segment #{} is not readable", i));
        if (!loads_.empty() && p.p_vaddr < loads_.back().vaddr + loads_.back().memsz)
          return fail(at, fmt::format("loaded segment #{} at address {:#x} overlaps or precedes "
                                      "the one before it",
                                      i, p.p_vaddr));
        loads_.push_back({p.p_vaddr, p.p_memsz, p.p_offset, p.p_filesz, p.p_flags});
        break;
      }
      case PT_DYNAMIC:
        if (dynamic)
          return fail(at, "a second dynamic segment");
        dynamic = p;
        dynamicPhdrAt_ = at;
        break;
      case PT_GNU_STACK:
        if (p.p_flags & PF_X)
          return fail(at, "the library asks for an executable stack");
        break;
      case PT_NOTE:
      case PT_PHDR:
      case PT_GNU_EH_FRAME:
      case PT_GNU_PROPERTY:
      case PT_GNU_RELRO:
        inLoaded.push_back({at, p});
        break;
      case PT_INTERP:
        return fail(at, "an interpreter segment: this is a program, not a kernel library");
      case PT_TLS:
        return fail(at, "a thread-local storage segment, which kernels never have");
      default:
        return fail(at, fmt::format("segment #{} has type {:#x}, which a kernel library does "
                                    "not need",
                                    i, p.p_type));
      }
    }
    if (loads_.empty())
      return fail(header_.e_phoff, "no loaded segment");
    for (const auto &[at, p] : inLoaded) {
      // The loader reads notes and the program headers through memory, and protects the
      // RELRO range after relocating.
      // RELRO covers writable data; the others are read by the loader or by unwinders after
      // relocation, so relocations must not be able to change them.
      const Segment *holder = fileSegment(p.p_vaddr, p.p_memsz);
      bool inside = p.p_type == PT_GNU_RELRO ? segmentHolding(p.p_vaddr, p.p_memsz) != nullptr
                                             : holder && !(holder->flags & PF_W);
      if (!inside || p.p_filesz > p.p_memsz)
        return fail(at, fmt::format("segment of type {:#x} ({} bytes at address {:#x}) is not "
                                    "inside a{} loaded segment",
                                    p.p_type, p.p_memsz, p.p_vaddr,
                                    p.p_type == PT_GNU_RELRO ? "" : " read-only"));
      if (p.p_type == PT_PHDR &&
          (*fileOffset(p.p_vaddr, p.p_memsz) != header_.e_phoff ||
           p.p_memsz != uint64_t(header_.e_phnum) * sizeof(Elf64_Phdr)))
        return fail(at, "the program header segment does not cover the program headers");
      if (p.p_type == PT_NOTE || p.p_type == PT_GNU_PROPERTY)
        if (Status s = notes(at, *fileOffset(p.p_vaddr, p.p_memsz), p.p_memsz, p.p_align);
            !s.ok())
          return s;
    }
    if (!dynamic)
      return fail(header_.e_phoff, "no dynamic segment: the loader could not find the symbols");
    // Writable, because the loader adds the load address to its address entries in place.
    const Segment *holder = fileSegment(dynamic->p_vaddr, dynamic->p_memsz);
    if (!holder || !(holder->flags & PF_W) || dynamic->p_memsz != dynamic->p_filesz ||
        dynamic->p_memsz % sizeof(Elf64_Dyn) || dynamic->p_memsz == 0)
      return fail(dynamicPhdrAt_, fmt::format("the dynamic segment ({} bytes at address {:#x}) is "
                                              "not whole entries inside a writable loaded "
                                              "segment's file bytes",
                                              dynamic->p_memsz, dynamic->p_vaddr));
    dynamicAt_ = holder->offset + (dynamic->p_vaddr - holder->vaddr);
    dynamicVaddr_ = dynamic->p_vaddr;
    dynamicSize_ = dynamic->p_memsz;
    return Status();
  }

  /// A note segment: whole notes, each name and descriptor padded to the segment's alignment.
  Status notes(uint64_t phdrAt, uint64_t at, uint64_t size, uint64_t align) {
    uint64_t pad = align == 8 ? 8 : 4, end = at + size;
    while (at < end) {
      if (end - at < sizeof(Elf64_Nhdr))
        return fail(at, "a note header runs past its segment");
      auto n = load<Elf64_Nhdr>(at);
      uint64_t name = (uint64_t(n.n_namesz) + pad - 1) / pad * pad;
      uint64_t desc = (uint64_t(n.n_descsz) + pad - 1) / pad * pad;
      at += sizeof(Elf64_Nhdr);
      if (name > end - at || desc > end - at - name)
        return fail(at, fmt::format("a note of {} name and {} descriptor bytes runs past its "
                                    "segment (program header at byte {})",
                                    n.n_namesz, n.n_descsz, phdrAt));
      at += name + desc;
    }
    return Status();
  }

  Status dynamicEntries() {
    for (uint64_t at = dynamicAt_; at < dynamicAt_ + dynamicSize_; at += sizeof(Elf64_Dyn)) {
      auto d = load<Elf64_Dyn>(at);
      int64_t t = d.d_tag;
      if (t == DT_NULL)
        return Status();
      const char *refused = nullptr;
      switch (t) {
      case DT_NEEDED:
        needed_.push_back({at, d.d_un.d_val});
        continue;
      case DT_PLTRELSZ: case DT_PLTGOT: case DT_HASH: case DT_STRTAB: case DT_SYMTAB:
      case DT_RELA: case DT_RELASZ: case DT_RELAENT: case DT_STRSZ: case DT_SYMENT:
      case DT_SONAME: case DT_SYMBOLIC: case DT_PLTREL: case DT_DEBUG: case DT_JMPREL:
      case DT_BIND_NOW: case DT_FLAGS: case DT_GNU_HASH: case DT_VERSYM: case DT_RELACOUNT:
      case DT_FLAGS_1: case DT_VERNEED: case DT_VERNEEDNUM:
        if (!tags_.emplace(t, d.d_un.d_val).second)
          return fail(at, fmt::format("dynamic tag {:#x} appears twice", t));
        continue;
      case DT_INIT: case DT_FINI: case DT_INIT_ARRAY: case DT_FINI_ARRAY: case DT_INIT_ARRAYSZ:
      case DT_FINI_ARRAYSZ: case DT_PREINIT_ARRAY: case DT_PREINIT_ARRAYSZ:
        refused = "constructors or destructors, code the loader would run";
        break;
      case DT_RPATH: case DT_RUNPATH:
        refused = "a library search path";
        break;
      case DT_TEXTREL:
        refused = "relocations of read-only code";
        break;
      case DT_REL: case DT_RELSZ: case DT_RELENT:
        refused = "REL relocations (this machine uses RELA)";
        break;
      case DT_AUXILIARY: case DT_FILTER: case DT_AUDIT: case DT_DEPAUDIT: case DT_CONFIG:
        refused = "filter, audit or configuration libraries";
        break;
      case DT_VERDEF: case DT_VERDEFNUM:
        refused = "symbol version definitions, which kernel libraries do not make";
        break;
      default:
        return fail(at, fmt::format("dynamic tag {:#x} is not one a kernel library has", t));
      }
      return fail(at, fmt::format("dynamic tag {:#x} asks for {}", t, refused));
    }
    return fail(dynamicAt_, "the dynamic entries have no DT_NULL end inside their segment");
  }

  Status strings() {
    for (int64_t t : {DT_STRTAB, DT_STRSZ, DT_SYMTAB})
      if (!hasTag(t))
        return fail(dynamicAt_, fmt::format("no dynamic tag {} (string and symbol tables)", t));
    if (hasTag(DT_SYMENT) && tag(DT_SYMENT) != sizeof(Elf64_Sym))
      return fail(dynamicAt_, fmt::format("symbols of {} bytes, not {}", tag(DT_SYMENT),
                                          sizeof(Elf64_Sym)));
    if (uint64_t flags = hasTag(DT_FLAGS) ? tag(DT_FLAGS) : 0; flags & (DF_TEXTREL | DF_STATIC_TLS))
      return fail(dynamicAt_, fmt::format("flags {:#x} ask for text relocations or static TLS",
                                          flags));
    Status error;
    strSize_ = tag(DT_STRSZ);
    std::optional<uint64_t> at = table(tag(DT_STRTAB), strSize_, "string table", error);
    if (!at)
      return error;
    if (strSize_ == 0 || bytes_[*at + strSize_ - 1] != 0)
      return fail(*at, "the string table does not end with a NUL byte");
    strAt_ = *at;
    if (hasTag(DT_SONAME) && !string(tag(DT_SONAME)))
      return fail(dynamicAt_, "the library's name is outside the string table");
    return Status();
  }

  /// How many symbols the hash tables reach (the loader learns the count nowhere else), with
  /// every bucket and chain checked: a lookup follows them without bounds.
  Status symbolCount() {
    if (!hasTag(DT_HASH) && !hasTag(DT_GNU_HASH))
      return fail(dynamicAt_, "no hash table: the loader could not look symbols up");
    Status error;
    if (hasTag(DT_HASH)) {
      std::optional<uint64_t> at = table(tag(DT_HASH), 8, "SysV hash table", error);
      if (!at)
        return error;
      uint32_t buckets = load<uint32_t>(*at), chains = load<uint32_t>(*at + 4);
      if (!table(tag(DT_HASH), 8 + 4 * (uint64_t(buckets) + chains), "SysV hash table", error))
        return error;
      if (buckets == 0)
        return fail(*at, "the SysV hash table has no buckets");
      std::vector<char> seen(chains, 0);
      for (uint32_t b = 0; b < buckets; ++b)
        for (uint32_t i = load<uint32_t>(*at + 8 + 4 * uint64_t(b)); i != 0;
             i = load<uint32_t>(*at + 8 + 4 * (uint64_t(buckets) + i))) {
          if (i >= chains || seen[i])
            return fail(*at, fmt::format("SysV hash bucket {} leads to symbol {}, {}", b, i,
                                         i >= chains ? "past its chains" : "a second time"));
          seen[i] = 1;
        }
      symbols_ = chains;
    }
    if (hasTag(DT_GNU_HASH)) {
      std::optional<uint64_t> at = table(tag(DT_GNU_HASH), 16, "GNU hash table", error);
      if (!at)
        return error;
      uint32_t buckets = load<uint32_t>(*at), first = load<uint32_t>(*at + 4);
      uint32_t bloom = load<uint32_t>(*at + 8), shift = load<uint32_t>(*at + 12);
      if (buckets == 0 || bloom == 0 || (bloom & (bloom - 1)) != 0 || shift >= 64)
        return fail(*at, fmt::format("the GNU hash table has {} buckets, {} bloom words and "
                                     "shift {} (needs buckets, a power of two of words, a "
                                     "shift below 64)",
                                     buckets, bloom, shift));
      uint64_t chainsVaddr = tag(DT_GNU_HASH) + 16 + 8 * uint64_t(bloom) + 4 * uint64_t(buckets);
      std::optional<uint64_t> bucketsAt = table(tag(DT_GNU_HASH), chainsVaddr - tag(DT_GNU_HASH),
                                                "GNU hash table", error);
      if (!bucketsAt)
        return error;
      // Chains run to the end of the segment at most; where each one ends, from the right.
      uint64_t chainsAt = *bucketsAt + (chainsVaddr - tag(DT_GNU_HASH));
      uint64_t words = fileBytesFrom(chainsVaddr) / 4;
      std::vector<uint64_t> endOf(words + 1, UINT64_MAX);
      for (uint64_t j = words; j-- > 0;)
        endOf[j] = (load<uint32_t>(chainsAt + 4 * j) & 1) ? j : endOf[j + 1];
      uint64_t count = first;
      for (uint32_t b = 0; b < buckets; ++b) {
        uint32_t start = load<uint32_t>(*bucketsAt + 16 + 8 * uint64_t(bloom) + 4 * uint64_t(b));
        if (start == 0)
          continue;
        if (start < first || start - first >= words || endOf[start - first] == UINT64_MAX)
          return fail(*at, fmt::format("GNU hash bucket {} starts a chain at symbol {} that "
                                       "does not end inside the table (symbols from {})",
                                       b, start, first));
        count = std::max(count, first + endOf[start - first] + 1);
      }
      symbols_ = std::max(symbols_, count);
    }
    if (!table(tag(DT_SYMTAB), symbols_ * sizeof(Elf64_Sym), "symbol table", error))
      return error;
    return Status();
  }

  Status symbols() {
    uint64_t base = *fileOffset(tag(DT_SYMTAB), symbols_ * sizeof(Elf64_Sym));
    for (uint64_t i = 1; i < symbols_; ++i) {
      uint64_t at = base + i * sizeof(Elf64_Sym);
      auto s = load<Elf64_Sym>(at);
      if (!string(s.st_name))
        return fail(at, fmt::format("symbol #{}'s name is outside the string table", i));
      std::string_view name = *string(s.st_name);
      unsigned type = ELF64_ST_TYPE(s.st_info);
      if (type == STT_GNU_IFUNC || type == STT_TLS)
        return fail(at, fmt::format("symbol '{}' is {}", name,
                                    type == STT_TLS ? "thread-local"
                                                    : "an IFUNC, whose resolver the loader runs"));
      if (s.st_shndx == SHN_UNDEF || s.st_shndx == SHN_ABS)
        continue;
      const Segment *in = segmentHolding(s.st_value, std::max<uint64_t>(s.st_size, 1));
      if (!in || (type == STT_FUNC && !(in->flags & PF_X)))
        return fail(at, fmt::format("symbol '{}' ({} bytes at address {:#x}) is not inside {}",
                                    name, s.st_size, s.st_value,
                                    type == STT_FUNC ? "an executable segment"
                                                     : "a loaded segment"));
    }
    return Status();
  }

  /// Version needs and the version index of every symbol: the loader indexes its version
  /// array by them without bounds, and asserts that each needing file is a DT_NEEDED one.
  Status versions() {
    if (hasTag(DT_VERNEED) != hasTag(DT_VERNEEDNUM) || (hasTag(DT_VERSYM) && !hasTag(DT_VERNEED)))
      return fail(dynamicAt_, "symbol versions without the version needs they index, or a "
                              "version need count without its table");
    if (!hasTag(DT_VERNEED))
      return Status();
    Status error;
    uint32_t highest = 1, entries = 0;
    for (uint64_t vaddr = tag(DT_VERNEED);;) {
      std::optional<uint64_t> at = table(vaddr, sizeof(Elf64_Verneed), "version needs", error);
      if (!at)
        return error;
      auto need = load<Elf64_Verneed>(*at);
      std::optional<std::string_view> file = string(need.vn_file);
      bool isNeeded = file && std::any_of(needed_.begin(), needed_.end(), [&](auto &n) {
                        return string(n.second) == file;
                      });
      if (need.vn_version != 1 || !isNeeded || ++entries > tag(DT_VERNEEDNUM))
        return fail(*at, "a version need of another version, for a library not needed, or "
                         "past the count");
      // The loader follows vna_next until it is 0 whatever vn_cnt says; so do the checks, and
      // the two must agree.
      uint64_t auxVaddr = vaddr + need.vn_aux;
      for (uint32_t walked = 1;; ++walked) {
        std::optional<uint64_t> aux = table(auxVaddr, sizeof(Elf64_Vernaux), "version need", error);
        if (!aux)
          return error;
        auto v = load<Elf64_Vernaux>(*aux);
        if (!string(v.vna_name) || walked > need.vn_cnt)
          return fail(*aux, fmt::format("version need #{} of '{}' has a name outside the string "
                                        "table or is past its count, {}",
                                        walked, *file, need.vn_cnt));
        highest = std::max<uint32_t>(highest, v.vna_other & 0x7fff);
        if (v.vna_next == 0) {
          if (walked != need.vn_cnt)
            return fail(*aux, fmt::format("'{}' counts {} version needs and chains {}", *file,
                                          need.vn_cnt, walked));
          break;
        }
        auxVaddr += v.vna_next;
      }
      if (need.vn_next == 0)
        break;
      vaddr += need.vn_next;
    }
    if (!hasTag(DT_VERSYM))
      return Status();
    std::optional<uint64_t> at = table(tag(DT_VERSYM), 2 * symbols_, "symbol versions", error);
    if (!at)
      return error;
    for (uint64_t i = 0; i < symbols_; ++i)
      if (uint16_t v = load<uint16_t>(*at + 2 * i) & 0x7fff; v > highest)
        return fail(*at + 2 * i, fmt::format("symbol #{} has version index {}; the needs define "
                                             "up to {}",
                                             i, v, highest));
    return Status();
  }

  Status relocations() {
    if (hasTag(DT_RELAENT) && tag(DT_RELAENT) != sizeof(Elf64_Rela))
      return fail(dynamicAt_, fmt::format("relocations of {} bytes, not {}", tag(DT_RELAENT),
                                          sizeof(Elf64_Rela)));
    // The loader asserts both (an abort, not an error) before it looks at anything else.
    if ((hasTag(DT_PLTREL) && tag(DT_PLTREL) != DT_RELA) || (hasTag(DT_RELA) && !hasTag(DT_RELAENT)))
      return fail(dynamicAt_, "PLT relocations that are not RELA, or RELA relocations without "
                              "their entry size");
    if (hasTag(DT_JMPREL) && (!hasTag(DT_PLTREL) || !hasTag(DT_PLTRELSZ)))
      return fail(dynamicAt_, "PLT relocations without their kind or size");
    if (hasTag(DT_RELA) != hasTag(DT_RELASZ))
      return fail(dynamicAt_, "relocations without a size, or a size without relocations");
    if (hasTag(DT_RELACOUNT) &&
        (!hasTag(DT_RELASZ) || tag(DT_RELACOUNT) > tag(DT_RELASZ) / sizeof(Elf64_Rela)))
      return fail(dynamicAt_, "more relative relocations counted than there are relocations");
    if (hasTag(DT_JMPREL) && hasTag(DT_PLTGOT)) {
      const Segment *got = segmentHolding(tag(DT_PLTGOT), 3 * 8);
      if (!got || !(got->flags & PF_W))
        return fail(dynamicAt_, "the PLT's GOT is not inside a writable segment");
    }
    for (auto [addrTag, sizeTag] : {std::pair{DT_RELA, DT_RELASZ}, {DT_JMPREL, DT_PLTRELSZ}}) {
      if (!hasTag(addrTag))
        continue;
      Status error;
      uint64_t size = tag(sizeTag);
      std::optional<uint64_t> base = table(tag(addrTag), size, "relocation table", error);
      if (!base)
        return error;
      if (size % sizeof(Elf64_Rela) != 0)
        return fail(dynamicAt_, fmt::format("a relocation table of {} bytes", size));
      for (uint64_t at = *base; at < *base + size; at += sizeof(Elf64_Rela)) {
        auto r = load<Elf64_Rela>(at);
        uint32_t type = ELF64_R_TYPE(r.r_info);
        uint64_t symbol = ELF64_R_SYM(r.r_info);
        if (!plainRelocation(type))
          return fail(at, fmt::format("relocation type {} is not one a kernel library has "
                                      "(absolute, relative, GOT or PLT)",
                                      type));
        if (symbol >= symbols_ || (symbol == 0 && type != kRelative && type != 0))
          return fail(at, fmt::format("a relocation names symbol #{} of {}", symbol, symbols_));
        const Segment *target = segmentHolding(r.r_offset, 8);
        bool intoDynamic = r.r_offset < dynamicVaddr_ + dynamicSize_ &&
                           dynamicVaddr_ < r.r_offset + 8;
        if (type != 0 && (!target || !(target->flags & PF_W) || intoDynamic))
          return fail(at, fmt::format("a relocation writes address {:#x}, {}", r.r_offset,
                                      intoDynamic ? "inside the dynamic entries the loader reads"
                                                  : "outside the writable segments"));
      }
    }
    return Status();
  }

  Status needed() {
    for (const auto &[at, name] : needed_) {
      std::optional<std::string_view> library = string(name);
      if (!library || std::find(std::begin(kAllowedNeeded), std::end(kAllowedNeeded),
                                *library) == std::end(kAllowedNeeded))
        return fail(at, fmt::format("the library needs '{}'; kernel libraries need only {}",
                                    library ? *library : "(a name outside the string table)",
                                    fmt::join(kAllowedNeeded, ", ")));
    }
    return Status();
  }

  const std::vector<uint8_t> &bytes_;
  Elf64_Ehdr header_{};
  std::vector<Segment> loads_;
  uint64_t dynamicPhdrAt_ = 0, dynamicAt_ = 0, dynamicVaddr_ = 0, dynamicSize_ = 0;
  std::map<int64_t, uint64_t> tags_;
  std::vector<std::pair<uint64_t, uint64_t>> needed_; // (entry's byte, name's string offset)
  uint64_t strAt_ = 0, strSize_ = 0, symbols_ = 0;
};

} // namespace

Status checkElfImage(const std::vector<uint8_t> &image) { return ElfChecker(image).run(); }

} // namespace smelt::rt

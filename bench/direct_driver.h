// The driver's own function of a given name, found in libcuda's ELF symbol
// table on disk, past any interposer (gshare included): dlsym and
// cuGetProcAddress would both hand back gshare's wrapper under the preload.
// Lets a benchmark time the hooked and the direct call in one process,
// alternating every few milliseconds, so that machine drift cancels out.
#pragma once

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>

namespace bench {

inline void* driver_symbol(const char* name) {
  struct Library {
    std::string path;
    ElfW(Addr) base = 0;
  } library;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* lib = static_cast<Library*>(data);
        if (info->dlpi_name && strstr(info->dlpi_name, "libcuda.so")) {
          lib->path = info->dlpi_name;
          lib->base = info->dlpi_addr;
          return 1;
        }
        return 0;
      },
      &library);
  if (library.path.empty()) return nullptr;
  int fd = open(library.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  struct stat st;
  fstat(fd, &st);
  void* map = mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return nullptr;
  const auto* bytes = static_cast<const unsigned char*>(map);
  const auto* header = reinterpret_cast<const ElfW(Ehdr)*>(bytes);
  const auto* sections = reinterpret_cast<const ElfW(Shdr)*>(bytes + header->e_shoff);
  void* found = nullptr;
  for (int i = 0; i < header->e_shnum && !found; ++i) {
    if (sections[i].sh_type != SHT_DYNSYM) continue;
    const auto* symbols = reinterpret_cast<const ElfW(Sym)*>(bytes + sections[i].sh_offset);
    const char* names = reinterpret_cast<const char*>(bytes + sections[sections[i].sh_link].sh_offset);
    size_t count = sections[i].sh_size / sizeof(ElfW(Sym));
    for (size_t s = 0; s < count; ++s) {
      if (symbols[s].st_value == 0 || strcmp(names + symbols[s].st_name, name) != 0) continue;
      found = reinterpret_cast<void*>(library.base + symbols[s].st_value);
      break;
    }
  }
  munmap(map, size_t(st.st_size));
  return found;
}

}  // namespace bench

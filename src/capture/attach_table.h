// The attach table: every BPF program of the capture, the tracepoint it attaches to, whether its
// layer needs it, and the ways it can be attached, best first. One table for `iotwin check` (what
// it prints per layer) and for the loaders (which program variant they load), so check never
// offers a method the capture cannot use.
//
// A program attached more than one way is written once in bpf/ and wrapped per method: the
// tp_btf variant is named as in the table (iot_sys_enter), the raw_tp variant adds "_raw", the
// classic tracepoint variant "_tp" (ProgramVariant). The loader keeps the chosen variant and
// turns the others' autoload off.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace iotwin::capture {

// How a program attaches to a tracepoint.
//  - tp_btf: BTF-typed raw tracepoint; needs the tracepoint's btf_trace_ typedef in BTF.
//  - raw_tp: untyped raw tracepoint, attached by name; arguments read with probes.
//  - tracepoint: classic (perf) tracepoint; needs tracefs mounted to find the event id.
enum class AttachMethod { kNone, kTpBtf, kRawTp, kTracepoint };
std::string_view AttachMethodName(AttachMethod m);
// "tp_btf", "raw_tp", "tracepoint" -> the method; kNone for anything else.
AttachMethod ParseAttachMethod(std::string_view name);

// The parts of the memory layer (memory_options.h), as bits: a memory program loads when a part
// it serves is on.
enum MemoryPartBit : uint8_t {
  kMemoryFaults = 1,
  kMemoryCache = 2,
  kMemoryWriteback = 4,
  kMemorySubpage = 8,
  kMemoryState = 16,  // the page-cache state, when read in the kernel
};

struct ProgramAttach {
  std::string_view layer;       // the trace header's layer: "syscall", "memory", "block", ...
  std::string_view object;      // the BPF object (bpf/<object>.bpf.c)
  std::string_view program;     // the tp_btf variant's program name
  std::string_view tracepoint;  // "group:event"
  bool required = false;        // the layer cannot run without it
  std::array<AttachMethod, 3> methods{};  // in preference order; kNone ends the list
  uint8_t memory_parts = 0;  // memory rows: the MemoryPartBit bits of the parts it serves
  // A BPF helper the program calls that older kernels lack ("bpf_find_vma"), "" for none: the
  // verifier refuses the program, and with it its whole object, where the helper is missing.
  std::string_view helper;

  bool Offers(AttachMethod m) const;
  // The methods, "tp_btf, raw_tp" style.
  std::string MethodList() const;
  std::string_view group() const { return tracepoint.substr(0, tracepoint.find(':')); }
  std::string_view event() const { return tracepoint.substr(tracepoint.find(':') + 1); }
};

// Every program of the capture, grouped by layer in the order of `iotwin check`.
const std::vector<ProgramAttach>& AttachTable();
// The layers of the table, in order, each once.
std::vector<std::string_view> AttachLayers();
// The memory rows' programs that load when the MemoryPartBit bits `parts_on` are on, in table order.
std::vector<std::string_view> MemoryProgramsFor(uint8_t parts_on);
// The rows whose program calls `helper`.
std::vector<const ProgramAttach*> RowsNeedingHelper(std::string_view helper);
// The row of `program` (tp_btf name) in `object`, or null.
const ProgramAttach* FindAttach(std::string_view object, std::string_view program);

// The row of `object` whose tracepoint the ELF section `section` of a program names
// ("tp_btf/sys_enter", "raw_tp/block_rq_issue", "tp/raw_syscalls/sys_enter"), with the method the
// section attaches by in *method; null when no row of `object` has that tracepoint. The loaders
// find a loaded program's row this way, so a sibling variant (iot_proc_exit_legacy) needs no name
// rule of its own.
const ProgramAttach* RowOfSection(std::string_view object, std::string_view section,
                                  AttachMethod* method);

// The name of the program that attaches `tp_btf_name` by method `m` ("iot_sys_enter_raw").
std::string ProgramVariant(std::string_view tp_btf_name, AttachMethod m);

// IOTWIN_ATTACH=raw_tp or =tracepoint: use that method for every program whose row offers it
// and the kernel allows (for tests of the fallbacks, and to work around a kernel whose tp_btf
// misbehaves). kNone when unset, empty or "tp_btf"; an error for any other value.
Result<AttachMethod> ForcedAttachMethod();

}  // namespace iotwin::capture

#include "capture/attach_plan.h"

#include <algorithm>
#include <vector>

#include "capture/features.h"

namespace iotwin::capture {

AttachPlan PlanObject(std::string_view object, AttachMethod forced) {
  const Features& features = Features::Get();
  AttachPlan plan;
  for (const ProgramAttach& row : AttachTable()) {
    if (row.object != object) continue;
    AttachMethod m = features.ChooseAttach(row, forced);
    // None the probe approves: try the best one anyway; the load or attach error then explains.
    plan[std::string(row.program)] = m == AttachMethod::kNone ? row.methods[0] : m;
  }
  return plan;
}

// Moves every program of `plan` to its row's next method; false when none has one left.
bool DemotePlan(std::string_view object, AttachPlan* plan) {
  bool moved = false;
  for (auto& [program, method] : *plan) {
    const ProgramAttach* row = FindAttach(object, program);
    if (!row) continue;
    for (size_t i = 0; i + 1 < row->methods.size(); i++) {
      if (row->methods[i] == method && row->methods[i + 1] != AttachMethod::kNone) {
        method = row->methods[i + 1];
        moved = true;
        break;
      }
    }
  }
  return moved;
}

// Loads only the chosen variant of each planned program: `base` names the program family (the
// table's tp_btf name, or a sibling such as iot_proc_exit_legacy that shares its row's method).
void SelectVariant(bpf_object* obj, std::string_view base, AttachMethod chosen) {
  for (AttachMethod m : {AttachMethod::kTpBtf, AttachMethod::kRawTp, AttachMethod::kTracepoint}) {
    bpf_program* prog = bpf_object__find_program_by_name(obj, ProgramVariant(base, m).c_str());
    if (prog) bpf_program__set_autoload(prog, m == chosen);
  }
}

bpf_program* FindVariant(bpf_object* obj, std::string_view base, AttachMethod m) {
  return bpf_object__find_program_by_name(obj, ProgramVariant(base, m).c_str());
}

// "tp_btf", or "tp_btf, raw_tp" when the programs of the plan attach in more than one way.
std::string DescribePlan(const AttachPlan& plan) {
  std::vector<std::string> kinds;
  for (const auto& [program, method] : plan) {
    std::string name(AttachMethodName(method));
    if (std::find(kinds.begin(), kinds.end(), name) == kinds.end()) kinds.push_back(name);
  }
  std::string out;
  for (const auto& k : kinds) out += (out.empty() ? "" : ", ") + k;
  return out;
}

void SelectPlan(bpf_object* obj, const AttachPlan& plan) {
  for (const auto& [program, method] : plan) SelectVariant(obj, program, method);
}

std::string PlannedLoad::FallbackNote(std::string_view what) const {
  if (first_error.ok()) return "";
  const std::string& why = first_error.message();
  return fmt::format("{}: attached as {} after: {}", what, DescribePlan(plan),
                     why.substr(0, why.find('\n')));
}

Result<PlannedLoad> LoadByPlan(std::string_view object,
                               const std::function<Status(const AttachPlan&)>& load) {
  IOTWIN_ASSIGN_OR_RETURN(AttachMethod forced, ForcedAttachMethod());
  PlannedLoad done{PlanObject(object, forced), Status::Ok()};
  while (true) {
    Status st = load(done.plan);
    if (st.ok()) return done;
    if (done.first_error.ok()) done.first_error = st;
    if (!DemotePlan(object, &done.plan)) return done.first_error;
  }
}

}  // namespace iotwin::capture

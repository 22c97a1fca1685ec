// Fuzzes the audit journal's row parser and chain walk: VerifyJournalBytes over the input, then
// the input as a journal file through ReadJournalRows and Journal::Open (torn-tail recovery,
// chain verification) and one Append when it opens. Every row Open accepts must re-encode.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fak/audit/journal.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes = fak::fuzz::AsText(data, size);
  const fak::JournalCheck check = fak::VerifyJournalBytes(bytes);
  (void)check.ToStatus();
  const std::string path = fak::fuzz::ScratchDir() + "/audit.journal";
  fak::fuzz::WriteFile(path, bytes);
  auto rows = fak::ReadJournalRows(path);
  if (rows.has_value()) {
    (void)fak::VerifyJournalRows(*rows);
    for (const fak::JournalRow& row : *rows) {
      (void)fak::EncodeJournalRow(row);
      (void)fak::ComputeJournalRowHash(row);
    }
  }
  auto journal = fak::Journal::Open(path);
  if (!journal.has_value()) return 0;
  for (const fak::JournalRow& row : (*journal)->rows()) {
    auto line = fak::EncodeJournalRow(row);
    FAK_FUZZ_CHECK(line.has_value(), line.error().ToString());
  }
  auto appended = (*journal)->Append("fuzz", "subject", "{\"k\":1}");
  FAK_FUZZ_CHECK(appended.has_value(), appended.error().ToString());
  const fak::JournalCheck after = (*journal)->Verify();
  FAK_FUZZ_CHECK(after.ok(), after.detail);
  return 0;
}

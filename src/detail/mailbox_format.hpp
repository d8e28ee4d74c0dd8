// The host's reading of a device error report (iris/device/detail/mailbox.hpp): kept out of the
// device headers so that kernels do not compile <string>, <optional> and <cstdio>.
#pragma once

#include <optional>
#include <string>

#include "iris/device/detail/mailbox.hpp"

namespace iris::detail {

/// The report as one line, e.g. "rank 1: wait_until(heap offset 0x100040 on rank 1, ge 5) timed
/// out after 2.0 s, observed 3 (block 0, thread 0)"; nothing when the mailbox is empty.
std::optional<std::string> mailbox_report(const device::ErrorMailbox& m);

/// True when the report is a bounded wait that timed out (as opposed to a misuse that a check
/// caught).
bool mailbox_is_timeout(const device::ErrorMailbox& m);

}  // namespace iris::detail

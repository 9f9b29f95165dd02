// What this host's network looks like, for /system/ranks: its interfaces (the loopback left out),
// each with its IPv4 addresses, state and link speed where the kernel reports one. Between hosts
// the all-reduce runs over one of them; which one, the MPI transport settings say
// (suite/comm/mpi_settings.h).
#pragma once

#include <string>

namespace dlscale {

/// "eth0 10.77.0.2/24 up 10000Mb/s; ib0 192.168.1.5/24 up 100000Mb/s"; "" when there is none.
std::string describe_host_network();

}  // namespace dlscale

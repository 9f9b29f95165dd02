// A ClusterDescription built as a SimGrid platform with the S4U API. Internal to
// dlscale_project: it is the one header besides the simulations' sources that names SimGrid.
#pragma once

#include <simgrid/s4u/Host.hpp>

#include <vector>

#include "project/platform.h"

namespace dlscale::project {

/// The SimGrid configuration every simulation here runs with, as command-line arguments for
/// simgrid::s4u::Engine (the reasons are in simgrid_platform.cpp).
std::vector<std::string> simgrid_arguments();

/// Builds the nodes that `ranks` ranks need under the running Engine's root and returns each
/// rank's host (index = rank), placed as the description says. Call once per Engine.
std::vector<simgrid::s4u::Host*> build_cluster(const ClusterDescription& cluster, int ranks);

}  // namespace dlscale::project

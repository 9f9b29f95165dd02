// A ClusterDescription built as a SimGrid platform with the S4U API. Internal to
// dlscale_project: it is the one header besides the simulations' sources that names SimGrid.
#pragma once

#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Host.hpp>

#include <memory>
#include <string>
#include <vector>

#include "project/platform.h"

namespace dlscale::project {

/// A SimGrid Engine with the configuration every simulation here runs with (the reasons are in
/// simgrid_platform.cpp). One per process at a time.
std::unique_ptr<simgrid::s4u::Engine> make_engine();

/// Builds the nodes that `ranks` ranks need under the running Engine's root and returns each
/// rank's host (index = rank), placed as the description says; for a description with a
/// `simgrid_xml_file`, loads that file instead. Call once per Engine.
std::vector<simgrid::s4u::Host*> build_cluster(const ClusterDescription& cluster, int ranks);

}  // namespace dlscale::project

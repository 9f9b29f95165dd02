#include "suite/comm/host_network.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <vector>

#include <fmt/format.h>

namespace dlscale {

namespace {

/// The link speed the driver reports (the ethtool ioctl, which answers for this process's network
/// namespace, as /sys/class/net does not), in Mb/s; 0 when it reports none.
uint32_t link_speed_mbps(const std::string& name) {
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) return 0;
  ethtool_cmd cmd{};
  cmd.cmd = ETHTOOL_GSET;
  ifreq request{};
  std::snprintf(request.ifr_name, sizeof request.ifr_name, "%s", name.c_str());
  request.ifr_data = reinterpret_cast<char*>(&cmd);
  const bool ok = ioctl(fd, SIOCETHTOOL, &request) == 0;
  if (close(fd) != 0 || !ok) return 0;
  const uint32_t speed = ethtool_cmd_speed(&cmd);
  return speed == static_cast<uint32_t>(SPEED_UNKNOWN) ? 0 : speed;
}

int prefix_length(const sockaddr* mask) {
  if (mask == nullptr) return 0;
  uint32_t bits = ntohl(reinterpret_cast<const sockaddr_in*>(mask)->sin_addr.s_addr);
  int n = 0;
  while (bits & 0x80000000u) {
    ++n;
    bits <<= 1;
  }
  return n;
}

}  // namespace

std::string describe_host_network() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  const std::unique_ptr<ifaddrs, void (*)(ifaddrs*)> owned(list, freeifaddrs);
  std::map<std::string, std::vector<std::string>> addresses;  // interface -> "a.b.c.d/n"
  std::map<std::string, bool> running;                        // interface -> carrier and up
  for (const ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if ((i->ifa_flags & IFF_LOOPBACK) != 0) continue;
    std::vector<std::string>& mine = addresses[i->ifa_name];
    running[i->ifa_name] = (i->ifa_flags & IFF_RUNNING) != 0;
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    char text[INET_ADDRSTRLEN] = {0};
    if (inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr, text, sizeof text) ==
        nullptr) {
      continue;
    }
    mine.push_back(fmt::format("{}/{}", text, prefix_length(i->ifa_netmask)));
  }
  std::string out;
  for (const auto& [name, ips] : addresses) {
    std::string entry = name;
    for (const std::string& ip : ips) entry += " " + ip;
    entry += running[name] ? " up" : " down";
    // Links without a speed (many virtual ones, a link that is down) get none written.
    const uint32_t speed = link_speed_mbps(name);
    if (speed > 0) entry += fmt::format(" {}Mb/s", speed);
    out += (out.empty() ? "" : "; ") + entry;
  }
  return out;
}

}  // namespace dlscale

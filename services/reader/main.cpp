// SPDX-License-Identifier: BSD-3-Clause
#include "reader.hpp"

int main(int argc, char** argv)
{
    return ex2d::service::run_service(argc, argv, "reader", [](ex2d::service::ServiceContext& ctx) {
        return std::make_unique<ex2d::reader::Reader>(ctx);
    });
}

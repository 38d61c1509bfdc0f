// SPDX-License-Identifier: BSD-3-Clause
#include "writer.hpp"

int main(int argc, char** argv)
{
    return ex2d::service::run_service(argc, argv, "writer", [](ex2d::service::ServiceContext& ctx) {
        return std::make_unique<ex2d::writer::Writer>(ctx);
    });
}

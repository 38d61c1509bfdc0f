// SPDX-License-Identifier: BSD-3-Clause
#include "ex2d/arms.hpp"

#include <cctype>

namespace ex2d {

ArmDefaults arm_defaults(Arm arm)
{
    switch (arm) {
        case Arm::b:
            return {3600.0, 5800.0, 0.8, 4096, 4096, 3550.0, 5950.0, 0.04};
        case Arm::r:
            return {5760.0, 7620.0, 0.8, 4114, 4128, 5543.0, 7827.0, 0.01};
        case Arm::z:
            return {7520.0, 9824.0, 0.8, 4114, 4128, 7440.0, 9950.0, 0.01};
    }
    throw Error("arm_defaults: unknown arm");
}

Result<Arm> parse_arm(const std::string& text)
{
    std::string lower;
    for (char ch : text) lower += char(std::tolower(static_cast<unsigned char>(ch)));
    const bool valid = lower.size() == 1 ||
                       (lower.size() == 2 && std::isdigit(static_cast<unsigned char>(lower[1])));
    if (valid) {
        switch (lower[0]) {
            case 'b':
                return Arm::b;
            case 'r':
                return Arm::r;
            case 'z':
                return Arm::z;
            default:
                break;
        }
    }
    return Status::invalid("unknown arm or camera '" + text +
                           "' (expected b, r, z or a camera such as r0)");
}

char arm_letter(Arm arm)
{
    switch (arm) {
        case Arm::b:
            return 'b';
        case Arm::r:
            return 'r';
        case Arm::z:
            return 'z';
    }
    throw Error("arm_letter: unknown arm");
}

}  // namespace ex2d

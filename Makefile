# Packaging and end-to-end targets. The build and the unit/system tests are
# SwiftPM's and scripts/test's (see README.md).
#
#   make deb      build/lockwipe_<version>_<arch>.deb, then lintian (installs the
#                 build dependencies when run as root)
#   make e2e      boot Debian 12 under systemd-nspawn and test the package there (root)
#   make version  write Sources/LockwipeCore/Version.swift from packaging/debian/changelog
#   make man      regenerate man/lockwipectl.1 and man/lockwiped.8
#   make clean    remove build/ and .build-pkg/

.PHONY: deb e2e version man clean

deb:
	packaging/build-deb

e2e:
	IntegrationTests/e2e/run

version:
	scripts/update-version

man:
	scripts/update-man

clean:
	rm -rf build .build-pkg

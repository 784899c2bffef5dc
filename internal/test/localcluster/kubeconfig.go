package localcluster

import (
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func writeKubeconfig(path, server string, ca []byte, user, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["deckhand-local"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["deckhand-local"] = &clientcmdapi.Context{Cluster: "deckhand-local", AuthInfo: user}
	cfg.CurrentContext = "deckhand-local"
	return clientcmd.WriteToFile(*cfg, path)
}

// WriteKubeconfig writes a kubeconfig for this cluster that authenticates
// with token (for example a ServiceAccount token from the TokenRequest API).
func (c *Cluster) WriteKubeconfig(path, user, token string) error {
	return writeKubeconfig(path, c.APIServerURL, c.CAPEM, user, token)
}
